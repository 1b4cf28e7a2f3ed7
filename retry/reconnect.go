package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/parleyhq/parley/metrics"
)

// Errors a Session wraps to tell Reconnect how its connection ended.
var (
	// ErrRefused means the far end refused the connection itself (bad
	// credentials, a ban, a connection limit): waiting alone will not fix
	// it, so Reconnect logs it at error level. Wrap it with what to check.
	ErrRefused = errors.New("connection refused by the platform")
	// ErrReplaced means the far end closed the connection because another
	// client opened one for the same bot. Reconnect then waits its longest
	// backoff, so that two deployments sharing a bot do not take it from
	// each other every second.
	ErrReplaced = errors.New("connection taken over by another client")
)

// Session is one life of a long connection, long poll or server
// connection, from dial to drop. It returns when the connection ends or
// ctx ends. healthy reports that it got far enough — subscribed, a poll
// answered, up for a while — that the next wait starts short again: a
// connection that keeps failing at once waits longer and longer, one that
// ran fine and dropped comes back at once.
type Session func(ctx context.Context) (healthy bool, err error)

// Reconnect is Parley's one reconnect loop, for the channels' long
// connections and polls and the MCP servers: run a session, then wait
// longer, starting over after a healthy session. The zero value is not
// useful; set Integration and Backoff.
type Reconnect struct {
	// Integration is the integration label of parley_reconnects_total: a
	// platform name, "mcp", … (a constant, never an id).
	Integration string
	// Backoff spaces the sessions.
	Backoff Backoff
	// What names the connection in the log ("socket mode", "long
	// connection", "WeCom long connection").
	What string
	// Lost is the message logged when a session ends for an ordinary
	// reason (default: What + " lost; reconnecting").
	Lost    string
	Metrics *metrics.Metrics // nil: a private registry
	Log     *slog.Logger     // nil: discarded
	// Sleep waits between sessions and reports whether the full wait
	// passed; nil is the package's Sleep. Tests record or gate the waits.
	Sleep func(ctx context.Context, d time.Duration) bool
}

// Run holds the connection until ctx ends: it runs session, and when the
// session ends without ctx ending, logs why, waits and runs the next one.
// A failure is logged at its level (warning, or error for ErrRefused and
// ErrReplaced) when it differs from the one before, and at debug level
// when it repeats, so that an outage is one line however long it lasts; a
// healthy session in between makes the next failure news again. Every
// session after the first counts as a reconnect. Run returns when ctx
// ends, after the running session has returned.
func (r Reconnect) Run(ctx context.Context, session Session) {
	m, log := r.Metrics, r.Log
	if m == nil {
		m = metrics.New()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sleep := r.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	reconnects := m.Reconnects.WithLabelValues(r.Integration) // exists at zero for alerts
	backoff := r.Backoff
	last := "" // the failure last logged at its own level
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			reconnects.Inc()
		}
		healthy, err := session(ctx)
		if ctx.Err() != nil {
			return
		}
		if healthy {
			backoff.Reset()
			last = ""
		}
		wait := backoff.Next()
		level, msg := r.describe(err)
		if errors.Is(err, ErrReplaced) {
			wait = Jitter(max(backoff.Max, backoff.Min))
		}
		if failure := fmt.Sprint(err); failure == last {
			level = slog.LevelDebug
		} else {
			last = failure
		}
		log.Log(ctx, level, msg, "err", err, "retry_in", wait)
		if !sleep(ctx, wait) {
			return
		}
	}
}

// describe is the level and message of how a session ended.
func (r Reconnect) describe(err error) (slog.Level, string) {
	switch {
	case errors.Is(err, ErrReplaced):
		return slog.LevelError, r.What + " taken over by another client of the same bot; is it used elsewhere?"
	case errors.Is(err, ErrRefused):
		return slog.LevelError, r.What + " refused"
	case r.Lost != "":
		return slog.LevelWarn, r.Lost
	}
	return slog.LevelWarn, r.What + " lost; reconnecting"
}

// RetryUntil calls fn until it succeeds or ctx ends, on r's backoff: for a
// call that has no natural end and nothing better to do than wait for it,
// such as learning the bot's own identity or waiting for Redis to answer.
// It returns nil on success and ctx's error otherwise. Failures are
// counted and logged by r (a warning when the failure changes, not at
// every try), whose backoff spaces the tries.
func RetryUntil(ctx context.Context, r *Retrier, op string, fn func(ctx context.Context) error) error {
	err := r.WithAttempts(math.MaxInt).Do(ctx, op, func(ctx context.Context) (bool, time.Duration, error) {
		return true, 0, fn(ctx)
	})
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
