package schedule_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/triggers"
)

// fakeClock is a test's time: it moves only when the test says, and wakes
// the waiters whose time came.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters map[*fakeWaiter]bool
	changed chan struct{} // closed and replaced when waiters change
}

type fakeWaiter struct {
	at time.Time
	c  chan time.Time
}

func newFakeClock(now time.Time) *fakeClock {
	return &fakeClock{now: now, waiters: map[*fakeWaiter]bool{}, changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Until(t time.Time) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &fakeWaiter{at: t, c: make(chan time.Time, 1)}
	if !t.After(c.now) {
		w.c <- c.now
		return w.c, func() {}
	}
	c.waiters[w] = true
	c.signal()
	return w.c, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.waiters, w)
		c.signal()
	}
}

func (c *fakeClock) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Advance moves the time on by d and wakes who waited until then.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for w := range c.waiters {
		if !w.at.After(c.now) {
			w.c <- c.now
			delete(c.waiters, w)
		}
	}
	c.signal()
}

// WaitWaiters blocks until n waiters wait (every scheduler is idle).
func (c *fakeClock) WaitWaiters(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		c.mu.Lock()
		got, ch := len(c.waiters), c.changed
		c.mu.Unlock()
		if got == n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%d schedulers wait for the clock, want %d", got, n)
		}
	}
}

// recorder is a Submitter that keeps what it is given.
type recorder struct {
	got chan triggers.Work
}

func newRecorder() *recorder { return &recorder{got: make(chan triggers.Work, 100)} }

func (r *recorder) SubmitWork(_ context.Context, w triggers.Work) error {
	r.got <- w
	return nil
}

// next returns the next work submitted, failing the test if none comes.
func (r *recorder) next(t *testing.T) triggers.Work {
	t.Helper()
	select {
	case w := <-r.got:
		return w
	case <-time.After(20 * time.Second):
		t.Fatal("no work was submitted")
		return triggers.Work{}
	}
}

// stuck is a Submitter that never finishes until its context ends: a
// replica killed mid-fire.
type stuck struct {
	entered chan struct{}
}

func (s *stuck) SubmitWork(ctx context.Context, _ triggers.Work) error {
	close(s.entered)
	<-ctx.Done()
	return ctx.Err()
}
