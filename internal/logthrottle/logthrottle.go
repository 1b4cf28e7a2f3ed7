// Package logthrottle keeps refused requests from flooding the log. Anyone
// can send a webhook a forged signature, a stale timestamp or an oversized
// body as fast as the network allows; logging each refusal would let them
// fill the disk and bury the lines an operator needs. A Throttle passes one
// line per (reason, source) per interval and counts the rest; the next line
// that passes says how many were left out ("suppressed"). The counters of
// the metrics registry still count every refusal.
//
// A Throttle belongs to whoever builds the handler that refuses (an
// adapter, the gateway, the admin console), never to the package: two
// handlers never share, or reset, each other's counts.
package logthrottle

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultEvery is the interval of the handlers that log refusals: one line
// per reason and source every 10 seconds.
const DefaultEvery = 10 * time.Second

// maxKeys bounds the (reason, source) pairs tracked. Callers pass code
// constants, so this is only a guard against one that passes request
// data: pairs past it share one entry rather than growing the map.
const maxKeys = 1024

type key struct{ reason, source string }

type entry struct {
	next       time.Time // the earliest time the next line may pass
	suppressed int64     // lines held back since the last that passed
}

// Throttle passes at most one log line per (reason, source) per interval.
// It is safe for concurrent use. A nil *Throttle passes every line.
type Throttle struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	seen map[key]*entry
}

// New returns a Throttle that passes one line per (reason, source) every
// interval (DefaultEvery when not positive), by the clock now (time.Now
// when nil).
func New(every time.Duration, now func() time.Time) *Throttle {
	if every <= 0 {
		every = DefaultEvery
	}
	if now == nil {
		now = time.Now
	}
	return &Throttle{every: every, now: now, seen: map[key]*entry{}}
}

// Allow reports whether a line for (reason, source) may be logged now and,
// when it may, how many lines of that pair were held back since the last
// one that passed.
func (t *Throttle) Allow(reason, source string) (ok bool, suppressed int64) {
	if t == nil {
		return true, 0
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	k := key{reason, source}
	e, found := t.seen[k]
	if !found && len(t.seen) >= maxKeys {
		k = key{}
		e, found = t.seen[k]
	}
	if !found {
		t.seen[k] = &entry{next: now.Add(t.every)}
		return true, 0
	}
	if now.Before(e.next) {
		e.suppressed++
		return false, 0
	}
	n := e.suppressed
	e.next, e.suppressed = now.Add(t.every), 0
	return true, n
}

// Log logs msg with args at level through log when Allow lets a line of
// (reason, source) pass; the line carries "suppressed", N when N lines of
// the pair were held back since the last one.
func (t *Throttle) Log(ctx context.Context, log *slog.Logger, level slog.Level, reason, source, msg string, args ...any) {
	if !log.Enabled(ctx, level) {
		return
	}
	ok, n := t.Allow(reason, source)
	if !ok {
		return
	}
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	log.Log(ctx, level, msg, args...)
}
