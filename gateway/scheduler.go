package gateway

import (
	"time"

	"github.com/parleyhq/parley/retry"
)

// The scheduler hands conversations to the workers, one turn at a time:
// a worker claims a conversation, serves its oldest message and gives the
// conversation back; when more is queued it goes to the back of the line,
// behind every conversation that was waiting, so a busy conversation cannot
// keep a worker while others wait. A conversation that cannot be served now
// (another replica holds it, or Redis failed) waits on a timer, holding no
// worker, and comes back when the timer fires.

// convState is what the scheduler knows of one conversation. A
// conversation without state is idle: nothing of it is queued here.
type convState struct {
	queued  bool        // in g.ready
	running bool        // a worker is serving it
	dirty   bool        // scheduled while running: look again
	timer   *time.Timer // waiting to be tried again
	// failures backs off the retries after Redis errors; reset by a claim
	// that reached Redis.
	failures retry.Backoff
}

func (s *convState) idle() bool { return !s.queued && !s.running && s.timer == nil }

// next is what a served conversation needs next.
type next struct {
	again   bool          // more is queued: back of the line now
	retryIn time.Duration // try again after this wait (0: only when scheduled)
	failed  bool          // Redis failed: try again after a backoff
}

// schedule makes conv ready unless it is already queued, running (then it
// is looked at again when its turn ends) or waiting on a timer (which
// fires soon enough: see serve).
func (g *Gateway) schedule(conv string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	st := g.state[conv]
	if st == nil {
		st = &convState{failures: retry.Backoff{Min: g.cfg.RetryMin, Max: g.cfg.RetryMax}}
		g.state[conv] = st
	}
	switch {
	case st.running:
		st.dirty = true
	case st.queued || st.timer != nil:
	default:
		g.enqueueLocked(conv, st)
	}
}

// enqueueLocked puts conv at the back of the line. g.mu is held.
func (g *Gateway) enqueueLocked(conv string, st *convState) {
	st.queued = true
	g.ready = append(g.ready, conv)
	g.cond.Signal()
}

// next blocks until a conversation is ready or Shutdown begins.
func (g *Gateway) take() (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.ready) == 0 && !g.closed {
		g.cond.Wait()
	}
	if g.closed {
		return "", false
	}
	conv := g.ready[0]
	g.ready[0] = ""
	g.ready = g.ready[1:]
	st := g.state[conv]
	st.queued, st.running, st.dirty = false, true, false
	return conv, true
}

// done records how serving conv ended and sees to what comes next.
func (g *Gateway) done(conv string, n next) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.state[conv]
	st.running = false
	if !n.failed {
		st.failures.Reset()
	}
	switch {
	case g.closed:
	case n.again || st.dirty:
		g.enqueueLocked(conv, st)
	case n.failed:
		g.retryLocked(conv, st, st.failures.Next())
	case n.retryIn > 0:
		g.retryLocked(conv, st, n.retryIn)
	}
	st.dirty = false
	if st.idle() {
		delete(g.state, conv)
	}
}

// retryLocked schedules conv again after d, holding no worker meanwhile.
// g.mu is held.
func (g *Gateway) retryLocked(conv string, st *convState, d time.Duration) {
	st.timer = time.AfterFunc(d, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		st.timer = nil
		if g.closed {
			delete(g.state, conv)
			return
		}
		if !st.queued && !st.running {
			g.enqueueLocked(conv, st)
		}
	})
}

// known reports whether this replica has conv queued, running or waiting.
func (g *Gateway) known(conv string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state[conv] != nil
}

// stopTimers ends every pending retry. g.mu is held; g.closed is set, so
// no new timer starts.
func (g *Gateway) stopTimersLocked() {
	for conv, st := range g.state {
		if st.timer != nil && st.timer.Stop() {
			st.timer = nil
		}
		if st.idle() {
			delete(g.state, conv)
		}
	}
}

func (g *Gateway) worker() {
	defer g.wg.Done()
	for {
		conv, ok := g.take()
		if !ok {
			return
		}
		g.done(conv, g.serve(conv))
	}
}
