package sessions_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/sessions"
)

// TestOpenRedisSizesThePool: the pool holds a connection for every
// command the process may have in flight (conns), never fewer than
// go-redis's default, and a pool_size in the URL is the operator's.
func TestOpenRedisSizesThePool(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	def := 10 * runtime.GOMAXPROCS(0)
	with := func(param string) string {
		if strings.Contains(r.URL, "?") {
			return r.URL + "&" + param
		}
		return r.URL + "?" + param
	}
	tests := []struct {
		name  string
		url   string
		conns int
		want  int
	}{
		{"workers and webhooks", r.URL, def + 44, def + 44},
		{"fewer than the default", r.URL, 1, def},
		{"not asked", r.URL, 0, def},
		{"the URL's pool_size", with("pool_size=7"), def + 44, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := sessions.OpenRedis(context.Background(), tt.url, tt.conns)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := c.(*redis.Client).Options().PoolSize; got != tt.want {
				t.Errorf("pool size %d, want %d", got, tt.want)
			}
		})
	}
}
