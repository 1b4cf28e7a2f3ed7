package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is an exponential backoff with jitter, the one wait schedule of
// Parley's retry and reconnect loops. The ceiling starts at Min and doubles
// with every Next up to Max; each wait is drawn from the upper half of the
// ceiling (see Jitter), so callers that failed together do not come back
// together. Reset starts over, after a success or a healthy session.
//
// The zero value is not useful: set Min and Max (Max below Min counts as
// Min). A Backoff is not safe for concurrent use; each loop keeps its own.
type Backoff struct {
	Min, Max time.Duration
	ceiling  time.Duration
}

// Next returns the next wait and raises the ceiling for the one after.
func (b *Backoff) Next() time.Duration {
	switch {
	case b.ceiling <= 0:
		b.ceiling = max(b.Min, 0)
	case b.ceiling < b.Max/2:
		b.ceiling *= 2
	default:
		b.ceiling = b.Max
	}
	b.ceiling = min(b.ceiling, max(b.Max, b.Min))
	return Jitter(b.ceiling)
}

// Reset makes the next wait the shortest again.
func (b *Backoff) Reset() { b.ceiling = 0 }

// Jitter returns a wait drawn uniformly from [d/2, d] ("equal jitter"):
// never much shorter than asked, and spread so that many waiters do not
// wake at once.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// Sleep waits d or until ctx ends, and reports whether the full wait
// passed. Loops use it between tries so that a shutdown never waits out a
// backoff.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
