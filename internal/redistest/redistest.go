// Package redistest gives tests a real Redis with a key prefix of their own.
//
// It uses REDIS_URL when set (the test command starts a redis-server on a
// free port and exports it); otherwise it starts a redis-server for the test
// when one is installed; otherwise it falls back to the embedded miniredis
// and says so — unless PARLEY_TEST_REQUIRE_REDIS=1, as in CI, where a missing
// Redis fails the test instead of silently testing less.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Redis is one test's view of a Redis server.
type Redis struct {
	Client redis.UniversalClient
	// Prefix is unique to the test; every key it writes must start with it.
	Prefix string
	// URL connects another process (a parley binary) to the same server.
	URL string
}

// New returns a Redis for t; keys under its prefix are deleted at cleanup.
func New(t testing.TB) *Redis {
	t.Helper()
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = startServer(t)
	}
	return newAt(t, url)
}

// NewOwn is New on a server of t's own, whatever REDIS_URL says, for a
// test that changes what every client of a server sees: SCRIPT FLUSH
// empties the script cache of the whole server, and on the one every
// package's tests share it would add a NOSCRIPT and an EVAL to the round
// trips another test is counting.
func NewOwn(t testing.TB) *Redis {
	t.Helper()
	return newAt(t, startServer(t))
}

func newAt(t testing.TB, url string) *Redis {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("redistest: REDIS_URL: %v", err)
	}
	client := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatalf("redistest: redis at %s does not answer: %v", opts.Addr, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	r := &Redis{Client: client, Prefix: fmt.Sprintf("test:%s:%s:", name, hex.EncodeToString(b[:])), URL: url}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, r.Prefix+"*", 500).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			client.Del(ctx, keys...)
		}
		client.Close()
	})
	return r
}

func startServer(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("PARLEY_TEST_REQUIRE_REDIS") == "1" {
			t.Fatalf("redistest: REDIS_URL is unset and no redis-server is installed (PARLEY_TEST_REQUIRE_REDIS=1 forbids the embedded fallback)")
		}
		t.Logf("redistest: no redis-server installed; using the embedded miniredis")
		return "redis://" + miniredis.RunT(t).Addr()
	}
	addr := startRedis(t, bin, func(port int) []string {
		return []string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}
	}, freePorts(t, 65535))
	return "redis://" + addr
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
