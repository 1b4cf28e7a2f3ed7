package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of three masters started for one test.
type Cluster struct {
	Client *redis.ClusterClient
	// Prefix is unique to the test, as with New.
	Prefix string
	// Addrs are the masters' host:port.
	Addrs []string
}

// NewCluster starts a three-master Redis Cluster on free ports for t and
// stops it at cleanup. Without redis-server and redis-cli the test is
// skipped, saying so — unless PARLEY_TEST_REQUIRE_REDIS=1, where that
// fails it.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	server, serr := exec.LookPath("redis-server")
	cli, cerr := exec.LookPath("redis-cli")
	if serr != nil || cerr != nil {
		msg := "redistest: redis-server and redis-cli are needed for a Redis Cluster (apt-get install redis-server); SKIPPING a test of cluster behaviour"
		if os.Getenv("PARLEY_TEST_REQUIRE_REDIS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	c := &Cluster{Prefix: fmt.Sprintf("test:%s:", strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))}
	for range 3 {
		// Each attempt gets a fresh folder: a node that failed may have
		// written its nodes.conf. Its cluster bus listens on its port +
		// 10000, which must itself be a port.
		c.Addrs = append(c.Addrs, startRedis(t, server, func(port int) []string {
			dir := t.TempDir()
			return []string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
				"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"), "--dir", dir,
				"--logfile", filepath.Join(dir, "redis.log")}
		}, freePorts(t, 65535-10000)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, addr := range c.Addrs {
		node := redis.NewClient(&redis.Options{Addr: addr})
		for {
			info, err := node.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if ctx.Err() != nil {
				node.Close()
				t.Fatalf("redistest: cluster node %s never reached cluster_state:ok: %v", addr, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		node.Close()
	}
	c.Client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	t.Cleanup(func() { c.Client.Close() })
	if err := c.Client.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
		t.Fatalf("redistest: cluster does not answer: %v", err)
	}
	return c
}
