package gateway

import (
	"sync"
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

// scheduler is the line of conversations waiting for a worker, and what
// it knows of each conversation queued, running or waiting here.
type scheduler struct {
	mu     sync.Mutex
	cond   *sync.Cond // signalled when ready grows or closed is set
	state  map[string]*convState
	ready  []string // conversations waiting for a worker, oldest first
	closed bool
	// retryMin and retryMax bound the backoff after Redis failed.
	retryMin, retryMax time.Duration
}

func newScheduler(retryMin, retryMax time.Duration) *scheduler {
	s := &scheduler{state: map[string]*convState{}, retryMin: retryMin, retryMax: retryMax}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// close stops the line: take returns false from now on and every pending
// retry ends. It reports whether this call closed it.
func (g *scheduler) close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.closed = true
	g.stopTimersLocked()
	g.cond.Broadcast()
	return true
}

// isClosed reports whether close was called.
func (g *scheduler) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

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
func (g *scheduler) schedule(conv string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	st := g.state[conv]
	if st == nil {
		st = &convState{failures: retry.Backoff{Min: g.retryMin, Max: g.retryMax}}
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
func (g *scheduler) enqueueLocked(conv string, st *convState) {
	st.queued = true
	g.ready = append(g.ready, conv)
	g.cond.Signal()
}

// take blocks until a conversation is ready or Shutdown begins.
func (g *scheduler) take() (string, bool) {
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
func (g *scheduler) done(conv string, n next) {
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
func (g *scheduler) retryLocked(conv string, st *convState, d time.Duration) {
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
func (g *scheduler) known(conv string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state[conv] != nil
}

// stopTimersLocked ends every pending retry. g.mu is held; g.closed is set, so
// no new timer starts.
func (g *scheduler) stopTimersLocked() {
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
		conv, ok := g.sched.take()
		if !ok {
			return
		}
		g.sched.done(conv, g.serve(conv))
	}
}

// wake schedules conv now, even if it waits on a timer (the approval's
// expiry), so that a decision is acted on at once.
func (g *scheduler) wake(conv string) {
	g.mu.Lock()
	if st := g.state[conv]; st != nil && !g.closed && st.timer != nil && st.timer.Stop() {
		st.timer = nil
		if !st.queued && !st.running {
			g.enqueueLocked(conv, st)
		}
	}
	g.mu.Unlock()
	g.schedule(conv)
}
