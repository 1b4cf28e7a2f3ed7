package channels

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTyping counts the indicators shown and cleared. When gate is set,
// StartTyping signals entered and then waits for gate.
type fakeTyping struct {
	started, cleared atomic.Int32
	entered, gate    chan struct{}
}

func (f *fakeTyping) StartTyping(ctx context.Context, m Message) func() {
	if f.gate != nil {
		close(f.entered)
		<-f.gate
	}
	f.started.Add(1)
	return func() { f.cleared.Add(1) }
}

func TestTypingAfter(t *testing.T) {
	m := Message{Channel: "test", Chat: "C1"}
	t.Run("a turn done before the delay shows nothing", func(t *testing.T) {
		f := &fakeTyping{}
		stop := TypingAfter(t.Context(), f, m, time.Hour)
		stop()
		stop()
		if s, c := f.started.Load(), f.cleared.Load(); s != 0 || c != 0 {
			t.Fatalf("shown %d, cleared %d; want neither", s, c)
		}
	})
	t.Run("no delay shows it at once and clears it once", func(t *testing.T) {
		f := &fakeTyping{}
		stop := TypingAfter(t.Context(), f, m, 0)
		if f.started.Load() != 1 {
			t.Fatal("not shown at once")
		}
		stop()
		stop()
		if c := f.cleared.Load(); c != 1 {
			t.Fatalf("cleared %d times; want 1", c)
		}
	})
	t.Run("stop while it is being shown waits and clears it", func(t *testing.T) {
		f := &fakeTyping{entered: make(chan struct{}), gate: make(chan struct{})}
		stop := TypingAfter(t.Context(), f, m, time.Nanosecond)
		<-f.entered
		stopped := make(chan struct{})
		go func() {
			stop()
			close(stopped)
		}()
		close(f.gate)
		<-stopped
		if s, c := f.started.Load(), f.cleared.Load(); s != 1 || c != 1 {
			t.Fatalf("shown %d, cleared %d; want it shown and cleared", s, c)
		}
	})
	t.Run("a cancelled turn shows nothing", func(t *testing.T) {
		f := &fakeTyping{}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		stop := TypingAfter(ctx, f, m, time.Nanosecond)
		time.Sleep(time.Millisecond) // let the timer fire; either way nothing shows
		stop()
		if s := f.started.Load(); s != 0 {
			t.Fatalf("shown %d times for a cancelled turn", s)
		}
	})
}

// TestTypingAfterNeverLeavesOneBehind races the delay against stop: every
// indicator shown is cleared by the time stop returns, and none is shown
// after it. Run with -race.
func TestTypingAfterNeverLeavesOneBehind(t *testing.T) {
	m := Message{Channel: "test", Chat: "C1"}
	fakes := make([]*fakeTyping, 2000)
	for i := range fakes {
		f := &fakeTyping{}
		fakes[i] = f
		stop := TypingAfter(t.Context(), f, m, time.Duration(i%50)*time.Microsecond+time.Nanosecond)
		for range i % 7 {
			_ = f.started.Load() // vary when stop comes
		}
		stop()
		if s, c := f.started.Load(), f.cleared.Load(); s != c || s > 1 {
			t.Fatalf("run %d: shown %d, cleared %d when stop returned", i, s, c)
		}
	}
	shown := 0
	for i, f := range fakes {
		s, c := f.started.Load(), f.cleared.Load()
		if s != c {
			t.Fatalf("run %d: shown %d, cleared %d: shown after stop returned", i, s, c)
		}
		shown += int(s)
	}
	t.Logf("%d of %d runs showed the indicator before stop", shown, len(fakes))
}
