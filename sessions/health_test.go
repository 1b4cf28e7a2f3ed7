package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/metrics"
)

// An outage makes go-redis and every ping fail again and again; the log
// gets one line when Redis goes away and one when it is back, and go-redis's
// own messages reach the structured log, the repeats at debug level.
func TestRedisOutageIsLoggedOncePerChange(t *testing.T) {
	var buf bytes.Buffer
	m := metrics.New()
	h := NewHealth(m.RedisUp, slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	client := h // go-redis's logger
	down := errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	outage := func() {
		for range 3 {
			client.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts\n", 5)
			h.Observe(down)
		}
	}
	outage()
	if v := testutil.ToFloat64(m.RedisUp); v != 0 {
		t.Errorf("parley_redis_up = %v during the outage", v)
	}
	for range 3 {
		h.Observe(nil)
	}
	if v := testutil.ToFloat64(m.RedisUp); v != 1 {
		t.Errorf("parley_redis_up = %v after it", v)
	}
	outage() // a second outage is told again
	h.Observe(nil)

	var got []string
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var rec map[string]any
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(rec["level"], " ", rec["msg"]))
	}
	client1 := "redis client: redis: connection pool: failed to dial after 5 attempts"
	away := "redis does not answer; this replica reports not ready until it does"
	want := []string{
		"WARN " + client1, "WARN " + away, "DEBUG " + client1, "DEBUG " + client1, "INFO redis answers again",
		"WARN " + client1, "WARN " + away, "DEBUG " + client1, "DEBUG " + client1, "INFO redis answers again",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
