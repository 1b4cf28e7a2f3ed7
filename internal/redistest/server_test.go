package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestStartRedisMovesOnFromATakenPort: a port taken between the pick and
// the bind — by any listener, or by another redis-server that answers on
// it — makes the new server exit; the start moves on to another port and
// returns the address of the server it started, never the other owner's.
func TestStartRedisMovesOnFromATakenPort(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server installed")
	}
	args := func(port int) []string {
		return []string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}
	}
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	other := startRedis(t, bin, args, freePorts(t, 65535))

	for _, tc := range []struct {
		name  string
		taken string
	}{
		{"a listener", plain.Addr().String()},
		{"another redis-server", other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p, _ := net.SplitHostPort(tc.taken)
			takenPort, _ := strconv.Atoi(p)
			picks := 0
			ports := func() int {
				picks++
				if picks == 1 {
					return takenPort
				}
				return freePort(t)
			}
			addr := startRedis(t, bin, args, ports)
			if addr == tc.taken || picks < 2 {
				t.Fatalf("started on %s after %d picks; the taken port was %s", addr, picks, tc.taken)
			}
			c := redis.NewClient(&redis.Options{Addr: addr})
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := c.Ping(ctx).Err(); err != nil {
				t.Fatalf("the started server does not answer: %v", err)
			}
		})
	}
}
