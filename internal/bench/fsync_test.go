package bench

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// TestRedisFsync: the bench's Redis flushes its append-only file as Redis
// is deployed (everysec) unless told otherwise, and on every write for an
// outage run, whose kill -9 must lose no acknowledged write.
func TestRedisFsync(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server")
	}
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"default", Options{}, "everysec"},
		{"outage", Options{RedisOutage: 3 * time.Second}, "always"},
		{"asked always", Options{RedisFsync: "always"}, "always"},
		{"outage asked everysec", Options{RedisOutage: 3 * time.Second, RedisFsync: "everysec"}, "everysec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rds, err := startRedis(ctx, t.TempDir(), tc.o.redisFsync())
			if err != nil {
				t.Fatal(err)
			}
			defer rds.stop()
			got, err := rds.client.ConfigGet(ctx, "appendfsync").Result()
			if err != nil {
				t.Fatal(err)
			}
			if got["appendfsync"] != tc.want {
				t.Fatalf("appendfsync %q, want %q", got["appendfsync"], tc.want)
			}
		})
	}
}
