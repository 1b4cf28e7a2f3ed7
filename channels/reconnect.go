package channels

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"time"

	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/retry"
)

// Errors a Session wraps to tell Reconnect how its connection ended.
var (
	// ErrRefused means the platform refused the connection itself (bad
	// credentials, a ban, a connection limit): waiting alone will not fix
	// it, so Reconnect logs it at error level. Wrap it with what to check.
	ErrRefused = errors.New("connection refused by the platform")
	// ErrReplaced means the platform closed the connection because another
	// client opened one for the same bot. Reconnect then waits its longest
	// backoff, so that two deployments sharing a bot do not take it from
	// each other every second.
	ErrReplaced = errors.New("connection taken over by another client")
)

// Session is one life of a long connection or long poll, from dial to
// drop. It returns when the connection ends or ctx ends. healthy reports
// that it got far enough — subscribed, a poll answered — that the next
// wait starts short again: a connection that keeps failing at once waits
// longer and longer, one that ran fine and dropped comes back at once.
type Session func(ctx context.Context) (healthy bool, err error)

// Reconnect is the one reconnect loop of the adapters: run a session, then
// wait longer, starting over after a healthy session. The zero value is
// not useful; set Channel and Backoff.
type Reconnect struct {
	// Channel is the platform name, the channel label of
	// parley_channel_reconnects_total.
	Channel string
	// Backoff spaces the sessions.
	Backoff retry.Backoff
	// What names the connection in the log ("socket mode", "long
	// connection", "WeCom long connection").
	What    string
	Metrics *metrics.Metrics // nil: a private registry
	Log     *slog.Logger     // nil: discarded

	sleep func(ctx context.Context, d time.Duration) bool // tests record the waits
}

// Run holds the connection until ctx ends: it runs session, and when the
// session ends without ctx ending, logs why, waits and runs the next one.
// Every session after the first counts as a reconnect. Run returns when ctx
// ends, after the running session has returned.
func (r Reconnect) Run(ctx context.Context, session Session) {
	m, log := r.Metrics, r.Log
	if m == nil {
		m = metrics.New()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sleep := r.sleep
	if sleep == nil {
		sleep = retry.Sleep
	}
	backoff := r.Backoff
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			m.ChannelReconnects.WithLabelValues(r.Channel).Inc()
		}
		healthy, err := session(ctx)
		if ctx.Err() != nil {
			return
		}
		if healthy {
			backoff.Reset()
		}
		wait := backoff.Next()
		switch {
		case errors.Is(err, ErrReplaced):
			wait = retry.Jitter(max(backoff.Max, backoff.Min))
			log.Error(r.What+" taken over by another client of the same bot; is it used elsewhere?", "err", err, "retry_in", wait)
		case errors.Is(err, ErrRefused):
			log.Error(r.What+" refused", "err", err, "retry_in", wait)
		default:
			log.Warn(r.What+" lost; reconnecting", "err", err, "retry_in", wait)
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// RetryUntil calls fn until it succeeds or ctx ends, on r's backoff: for a
// call an adapter cannot work well without and that has no natural end,
// such as learning the bot's own identity. It returns nil on success and
// ctx's error otherwise. Failures are counted and logged by r (a warning
// when the failure changes), whose backoff spaces the tries.
func RetryUntil(ctx context.Context, r *retry.Retrier, op string, fn func(ctx context.Context) error) error {
	err := r.WithAttempts(math.MaxInt).Do(ctx, op, func(ctx context.Context) (bool, time.Duration, error) {
		return true, 0, fn(ctx)
	})
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
