package delivery

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/metrics"
)

// progressLog is a sink that records the kinds it was shown.
type progressLog struct {
	mu    sync.Mutex
	kinds []channels.ProgressKind
	shown chan channels.ProgressKind
}

func (s *progressLog) Show(_ context.Context, p channels.Progress) (bool, error) {
	s.mu.Lock()
	s.kinds = append(s.kinds, p.Kind)
	s.mu.Unlock()
	s.shown <- p.Kind
	return true, nil
}
func (s *progressLog) Finish(context.Context, channels.Reply) error { return nil }
func (s *progressLog) Discard(context.Context) error                { return nil }

func (s *progressLog) all() []channels.ProgressKind {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]channels.ProgressKind(nil), s.kinds...)
}

func holdingLive(t *testing.T, hold time.Duration) (*Live, *progressLog) {
	t.Helper()
	d := New(Config{FirstShow: hold, Metrics: metrics.New(), Log: slog.New(slog.DiscardHandler)})
	sink := &progressLog{shown: make(chan channels.ProgressKind, 16)}
	l := Route{d: d, m: channels.Message{Channel: "x", Received: time.Now()}}.live(context.Background(), sink, nil, hold)
	return l, sink
}

// TestALiveReplyShowsNothingWithinItsHold: what the turn writes before
// the hold passes is not shown, nor is the typing indicator: a turn that
// ends by then leaves the sink untouched, so its answer is posted whole.
func TestALiveReplyShowsNothingWithinItsHold(t *testing.T) {
	t.Parallel()
	l, sink := holdingLive(t, time.Hour)
	typed := false
	stop := l.TypingWhenWaiting(func() func() { typed = true; return func() {} })
	l.event(agent.Event{Kind: agent.EventText, Text: "the whole answer"})
	l.event(agent.Event{Kind: agent.EventTool, Name: "web_search"})
	l.stop()
	stop()
	if got := sink.all(); len(got) != 0 || typed {
		t.Fatalf("within the hold the sink was shown %v (typing %v); want nothing", got, typed)
	}
}

// TestAfterItsHoldALiveReplyShowsWhatWaits: once the hold passes, text
// written meanwhile is shown and no typing indicator is needed; a turn
// with nothing to show by then tells the sink it is at work and shows the
// typing indicator, which the returned stop clears.
func TestAfterItsHoldALiveReplyShowsWhatWaits(t *testing.T) {
	t.Parallel()
	t.Run("text waiting", func(t *testing.T) {
		t.Parallel()
		l, sink := holdingLive(t, 10*time.Millisecond)
		typed := false
		stop := l.TypingWhenWaiting(func() func() { typed = true; return func() {} })
		l.event(agent.Event{Kind: agent.EventText, Text: "half of "})
		if k := <-sink.shown; k != channels.ProgressText {
			t.Fatalf("first shown %v; want the text that waited", k)
		}
		l.stop()
		stop()
		if typed {
			t.Error("the typing indicator was shown beside text to show")
		}
	})
	t.Run("nothing yet", func(t *testing.T) {
		t.Parallel()
		l, sink := holdingLive(t, 10*time.Millisecond)
		var mu sync.Mutex
		shown, cleared := 0, 0
		stop := l.TypingWhenWaiting(func() func() {
			mu.Lock()
			shown++
			mu.Unlock()
			return func() { mu.Lock(); cleared++; mu.Unlock() }
		})
		if k := <-sink.shown; k != channels.ProgressWaiting {
			t.Fatalf("first shown %v; want ProgressWaiting", k)
		}
		l.stop()
		stop()
		stop()
		mu.Lock()
		defer mu.Unlock()
		if shown != 1 || cleared != 1 {
			t.Errorf("typing shown %d, cleared %d times; want once each", shown, cleared)
		}
	})
}
