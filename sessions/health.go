package sessions

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Health is what this process last saw of Redis. The health check, the
// readiness probe and Watch report every ping to it; it sets the up gauge
// (parley_redis_up) and logs only when the state changes: once when Redis
// stops answering, once when it is back, however many pings fail in
// between. It is also go-redis's logger (redis.SetLogger), so that the
// client's own messages reach the structured log without repeating
// through an outage. It is safe for concurrent use.
type Health struct {
	up  prometheus.Gauge
	log *slog.Logger

	away atomic.Bool // the last ping failed
	// clientSaid is set once go-redis's own logger has spoken; its next
	// messages go to debug until a ping succeeds again.
	clientSaid atomic.Bool
}

// NewHealth returns a Health that reports to up and log, which must not
// be nil.
func NewHealth(up prometheus.Gauge, log *slog.Logger) *Health {
	return &Health{up: up, log: log}
}

// Observe records the result of one ping: nil when Redis answered.
func (h *Health) Observe(err error) {
	if err != nil {
		h.up.Set(0)
		if h.away.CompareAndSwap(false, true) {
			h.log.Warn("redis does not answer; this replica reports not ready until it does", "err", err)
		}
		return
	}
	h.up.Set(1)
	h.clientSaid.Store(false)
	if h.away.CompareAndSwap(true, false) {
		h.log.Info("redis answers again")
	}
}

// Watch pings every interval until ctx ends and observes each answer, so
// that the up gauge stays current without waiting for a readiness probe
// (the Redis-down alert fires on its own). Each ping may take up to one
// interval. Run it on a goroutine of the caller's; it returns when ctx
// ends.
func (h *Health) Watch(ctx context.Context, ping func(ctx context.Context) error, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, every)
			h.Observe(ping(pctx))
			cancel()
		}
	}
}

// Printf implements go-redis's logger: its messages (connection pool
// failures, dropped pub/sub connections) go into the structured log.
// During an outage go-redis says the same on every retry: the first
// message is a warning, the others go to debug until a ping succeeds
// again.
func (h *Health) Printf(ctx context.Context, format string, v ...any) {
	msg := "redis client: " + strings.TrimSpace(fmt.Sprintf(format, v...))
	if h.clientSaid.CompareAndSwap(false, true) {
		h.log.WarnContext(ctx, msg, "repeats", "at debug level until redis answers again")
		return
	}
	h.log.DebugContext(ctx, msg)
}
