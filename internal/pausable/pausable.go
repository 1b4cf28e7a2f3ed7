// Package pausable is a context timeout whose clock stops while the work
// it bounds waits for a person: a turn's deadline, a tool call's, while a
// tool's server waits for someone's answer in the chat. Time spent on
// the machine's side still counts; time the person takes does not, up to
// whatever bounds the wait itself.
package pausable

import (
	"context"
	"sync"
	"time"
)

// timer is one pausable timeout: it cancels its context with cause once
// it has run for its whole duration, not counting paused time.
type timer struct {
	parent *timer // the pausable timeout ctx was derived under, if any
	cancel context.CancelCauseFunc
	cause  error

	mu        sync.Mutex
	left      time.Duration // what is left, as of since (while running)
	since     time.Time
	t         *time.Timer
	paused    int // Pause calls not yet resumed
	cancelled bool
}

type key struct{}

// WithTimeout is context.WithTimeoutCause whose clock Pause stops.
func WithTimeout(parent context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	tm := &timer{cancel: cancel, cause: cause, left: d, since: time.Now()}
	tm.parent, _ = parent.Value(key{}).(*timer)
	tm.t = time.AfterFunc(d, tm.expire)
	return context.WithValue(ctx, key{}, tm), func() {
		tm.mu.Lock()
		tm.cancelled = true
		tm.t.Stop()
		tm.mu.Unlock()
		cancel(context.Canceled)
	}
}

// expire ends the context, unless the clock was stopped meanwhile.
func (tm *timer) expire() {
	tm.mu.Lock()
	fire := tm.paused == 0 && !tm.cancelled
	tm.mu.Unlock()
	if fire {
		tm.cancel(tm.cause)
	}
}

// pause stops the clock.
func (tm *timer) pause() {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if tm.paused++; tm.paused > 1 {
		return
	}
	if tm.t.Stop() {
		tm.left -= time.Since(tm.since)
	} else {
		tm.left = 0 // it has run out already: it ends as soon as resumed
	}
}

// resume starts the clock again with what was left.
func (tm *timer) resume() {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if tm.paused--; tm.paused > 0 || tm.cancelled {
		return
	}
	tm.since = time.Now()
	tm.t.Reset(max(tm.left, 0))
}

// Pause stops the clock of every pausable timeout ctx is under, until
// resume is called (once). A ctx under none pauses nothing.
func Pause(ctx context.Context) (resume func()) {
	var timers []*timer
	for tm, _ := ctx.Value(key{}).(*timer); tm != nil; tm = tm.parent {
		tm.pause()
		timers = append(timers, tm)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, tm := range timers {
				tm.resume()
			}
		})
	}
}
