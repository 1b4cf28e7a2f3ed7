// Package retry is Parley's one retry loop for outbound calls: the model,
// the platforms' Web APIs, and whatever calls out next (MCP servers, the
// outbox). A caller writes one attempt and classifies its failure as
// (retry bool, after time.Duration, err error); the loop owns everything
// else, the same way for every integration:
//
//   - exponential backoff with jitter between tries (Backoff), or exactly
//     the wait the far end asked for (Retry-After), up to a cap;
//   - the context: a cancelled or expired caller ends the loop at once,
//     also in the middle of a wait;
//   - the metric parley_outbound_failures_total{integration, reason,
//     outcome}, with reasons from a closed set (Reason) and outcome "retry"
//     or "error" (the failure ended the call);
//   - the log, which records a failure when its reason changes, not on
//     every attempt, and the final failure once.
//
// The package also holds the one reconnect loop (Reconnect), for the
// channels' long connections and polls and the MCP servers, RetryUntil for
// a call that is tried until it works, and the one backoff type they all
// wait on. It depends on nothing of Parley's but metrics.
package retry

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/parleyhq/parley/metrics"
)

// Defaults of a Policy's zero fields.
const (
	DefaultMinWait       = 500 * time.Millisecond
	DefaultMaxWait       = 30 * time.Second
	DefaultMaxRetryAfter = 30 * time.Second
)

// Attempt makes one try of a call. A nil err is success. Otherwise retry
// says whether sending the same request again may succeed (a rate limit,
// a 5xx, a dropped connection — not a refused token or a bad request), and
// after, when positive, is the wait the far end asked for (Retry-After).
// Attach a Reason to err with Mark when the loop cannot infer it.
//
// The attempt counts its own platform-specific metrics (an error code, a
// latency); the loop counts the failure by reason.
type Attempt func(ctx context.Context) (retry bool, after time.Duration, err error)

// Attempted describes one finished attempt, for callers that keep request
// metrics of their own (the model's parley_llm_requests_total).
type Attempted struct {
	Outcome  string // metrics.OutcomeOK, metrics.OutcomeRetry or metrics.OutcomeError
	Duration time.Duration
	Reason   Reason // zero on success
	Err      error
	// Context is the context the call was made with: its trace, for an
	// exemplar of the latency observed.
	Context context.Context
}

// Policy shapes a Retrier. The zero value tries once.
type Policy struct {
	// Attempts is the number of tries in all, the first included; below 1
	// it is 1 (never retry).
	Attempts int
	// MinWait and MaxWait bound the backoff between tries (defaults
	// DefaultMinWait and DefaultMaxWait).
	MinWait, MaxWait time.Duration
	// MaxRetryAfter is the longest Retry-After honoured (default
	// DefaultMaxRetryAfter). A longer one ends the call at once: waiting
	// that long would hold up a conversation. A caller that would rather
	// wait the cap clamps after itself.
	MaxRetryAfter time.Duration
	// Sleep waits between tries and must return ctx.Err() when ctx ends
	// first; nil waits on a timer. Tests record the waits with it.
	Sleep func(ctx context.Context, d time.Duration) error
	// Observe, when set, is told about every attempt once the loop has
	// decided what follows it.
	Observe func(Attempted)
}

func (p Policy) withDefaults() Policy {
	p.Attempts = max(p.Attempts, 1)
	if p.MinWait <= 0 {
		p.MinWait = DefaultMinWait
	}
	if p.MaxWait <= 0 {
		p.MaxWait = max(DefaultMaxWait, p.MinWait)
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if p.Sleep == nil {
		p.Sleep = sleepErr
	}
	return p
}

func sleepErr(ctx context.Context, d time.Duration) error {
	if !Sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}

// Retrier runs calls of one integration under one Policy. It is immutable
// and safe for concurrent use.
type Retrier struct {
	integration string
	policy      Policy
	m           *metrics.Metrics
	log         *slog.Logger
	quiet       bool // Once: the caller reports the failure
}

// New returns a Retrier for integration, the value of the integration label
// and log attribute ("model", "slack", …; a constant, never an id). m nil
// counts into a private registry; log nil discards. It creates the
// integration's failure series at zero, so alerts see the first increase.
func New(integration string, p Policy, m *metrics.Metrics, log *slog.Logger) *Retrier {
	if m == nil {
		m = metrics.New()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, r := range Reasons() {
		for _, o := range []string{metrics.OutcomeRetry, metrics.OutcomeError} {
			m.OutboundFailures.WithLabelValues(integration, r.String(), o)
		}
	}
	return &Retrier{integration: integration, policy: p.withDefaults(), m: m, log: log.With("integration", integration)}
}

// WithAttempts returns a Retrier like r that tries n times in all: for a
// call that must not be repeated as often (a typing indicator).
func (r *Retrier) WithAttempts(n int) *Retrier {
	c := *r
	c.policy.Attempts = max(n, 1)
	return &c
}

// Once returns a Retrier like r that tries once and leaves the failure to
// its caller to report: for a call whose caller tries again itself (a
// RetryUntil, the outbox), which logs what follows. Its failure is still
// counted, and logged at debug: a warning of "attempts used up" before the
// caller's "retrying" would say two things of one failure, the first
// untrue.
func (r *Retrier) Once() *Retrier {
	c := r.WithAttempts(1)
	c.quiet = true
	return c
}

// Do runs attempt until it succeeds, it says not to retry, the attempts
// run out, the far end asks for a wait longer than MaxRetryAfter, or ctx
// ends. op names the call in the log ("chat.postMessage"); the attempt's
// own error should name it too, since that is what Do returns: as it is
// after one attempt (without a Mark), with " (after N attempts)" after
// several, and wrapping ctx's error as well when ctx ended the call.
func (r *Retrier) Do(ctx context.Context, op string, attempt Attempt) error {
	p := r.policy
	backoff := Backoff{Min: p.MinWait, Max: p.MaxWait}
	// op goes on each failure's line, not into a logger made per call
	// (slog's With formats at once): the call that succeeds logs nothing.
	log := r.log
	var lastReason Reason
	for n := 1; ; n++ {
		start := time.Now()
		again, after, err := attempt(ctx)
		elapsed := time.Since(start)
		if err == nil {
			r.observe(Attempted{Outcome: metrics.OutcomeOK, Duration: elapsed, Context: ctx})
			return nil
		}
		reason := ReasonOf(err, after)
		if ctx.Err() != nil {
			// The caller gave up, not the far end: not counted as its failure.
			r.observe(Attempted{Outcome: metrics.OutcomeError, Duration: elapsed, Reason: reason, Err: err, Context: ctx})
			return fmt.Errorf("%w (stopped: %w)", unmark(err), context.Cause(ctx))
		}
		why := ""
		switch {
		case !again:
			why = "not retryable"
		case n >= p.Attempts:
			why = "attempts used up"
		case after > p.MaxRetryAfter:
			why = "asked to wait longer than " + p.MaxRetryAfter.String()
		}
		if why != "" {
			r.count(reason, metrics.OutcomeError)
			r.observe(Attempted{Outcome: metrics.OutcomeError, Duration: elapsed, Reason: reason, Err: err, Context: ctx})
			level := slog.LevelWarn
			if r.quiet {
				level = slog.LevelDebug
			}
			log.Log(ctx, level, "outbound call failed", "op", op, "attempts", n, "reason", reason.String(), "why", why, "err", err)
			if n == 1 {
				return unmark(err)
			}
			return fmt.Errorf("%w (after %d attempts)", unmark(err), n)
		}
		r.count(reason, metrics.OutcomeRetry)
		r.observe(Attempted{Outcome: metrics.OutcomeRetry, Duration: elapsed, Reason: reason, Err: err, Context: ctx})
		wait := after
		if wait <= 0 {
			wait = backoff.Next()
		}
		level := slog.LevelDebug
		if reason != lastReason {
			level = slog.LevelWarn
		}
		lastReason = reason
		log.Log(ctx, level, "outbound call failed; retrying", "op", op, "attempt", n, "reason", reason.String(),
			"retry_in", wait, "retry_after", after > 0, "err", err)
		if serr := p.Sleep(ctx, wait); serr != nil {
			return fmt.Errorf("%w (stopped: %w)", unmark(err), serr)
		}
	}
}

func (r *Retrier) count(reason Reason, outcome string) {
	r.m.OutboundFailures.WithLabelValues(r.integration, reason.String(), outcome).Inc()
}

func (r *Retrier) observe(a Attempted) {
	if r.policy.Observe != nil {
		r.policy.Observe(a)
	}
}
