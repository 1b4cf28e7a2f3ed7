package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// lastTTL is how long a webhook's last request is remembered.
const lastTTL = 30 * 24 * time.Hour

// LastRequest is a webhook's last request, as `parley triggers list` and
// the admin console show it.
type LastRequest struct {
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome"` // an outcome of parley_trigger_requests_total, or error (not queued)
}

// lastKey is the Redis key of name's last request.
func lastKey(prefix, name string) string { return prefix + "trigger-webhook:last:" + name }

// record keeps the outcome of name's request just served; a failure is
// logged, never the request's.
func (s *Server) record(ctx context.Context, name, outcome string) {
	ctx = context.WithoutCancel(ctx)
	pipe := s.opts.Redis.TxPipeline()
	key := lastKey(s.opts.Prefix, name)
	pipe.HSet(ctx, key, "at", s.opts.Now().UTC().Format(time.RFC3339Nano), "outcome", outcome)
	pipe.Expire(ctx, key, lastTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		s.log.WarnContext(ctx, "record a webhook's last request", "webhook", name, "err", err)
	}
}

// Last returns name's last request; ok is false when none is recorded.
func Last(ctx context.Context, client redis.UniversalClient, prefix, name string) (last LastRequest, ok bool, err error) {
	vals, err := client.HGetAll(ctx, lastKey(prefix, name)).Result()
	if errors.Is(err, redis.Nil) || err == nil && len(vals) == 0 {
		return LastRequest{}, false, nil
	}
	if err != nil {
		return LastRequest{}, false, fmt.Errorf("webhook: read the last request of %s: %w", name, err)
	}
	at, _ := time.Parse(time.RFC3339Nano, vals["at"])
	return LastRequest{At: at, Outcome: vals["outcome"]}, true, nil
}
