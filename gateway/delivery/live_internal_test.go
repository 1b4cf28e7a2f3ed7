package delivery

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/metrics"
)

// slowSink blocks each Show until released, recording what it was shown.
type slowSink struct {
	release chan struct{}
	entered chan struct{}
	mu      sync.Mutex
	shown   []channels.Progress
}

func (s *slowSink) Show(_ context.Context, p channels.Progress) (bool, error) {
	s.entered <- struct{}{}
	<-s.release
	s.mu.Lock()
	s.shown = append(s.shown, p)
	s.mu.Unlock()
	return true, nil
}
func (s *slowSink) Finish(context.Context, channels.Reply) error { return nil }
func (s *slowSink) Discard(context.Context) error                { return nil }

// TestLiveReplyMergesTextWhileTheSinkIsBusy: events never wait for the
// sink; text arriving while a Show is in flight reaches it as one piece,
// a reset withdraws queued text that was never shown, and what the sink
// ends with is the text after the last reset.
func TestLiveReplyMergesTextWhileTheSinkIsBusy(t *testing.T) {
	t.Parallel()
	sink := &slowSink{release: make(chan struct{}), entered: make(chan struct{}, 16)}
	l := &Live{sink: sink, d: New(Config{Metrics: metrics.New(), Log: slog.New(slog.DiscardHandler)}), msg: channels.Message{Channel: "x", Received: time.Now()},
		wake: make(chan struct{}, 1), stopped: make(chan struct{}), done: make(chan struct{})}
	go l.pump(context.Background())

	l.event(agent.Event{Kind: agent.EventText, Text: "Hel"})
	<-sink.entered // "Hel" is being shown; the rest queues
	for _, s := range []string{"lo", " wor", "ld"} {
		l.event(agent.Event{Kind: agent.EventText, Text: s})
	}
	l.event(agent.Event{Kind: agent.EventReset}) // withdraws "lo wor ld" (never shown) and "Hel" (shown)
	l.event(agent.Event{Kind: agent.EventTool, Name: "lookup"})
	for _, s := range []string{"Hi", " there"} {
		l.event(agent.Event{Kind: agent.EventText, Text: s})
	}
	sink.release <- struct{}{}
	for range 3 { // reset, tool, "Hi there"
		<-sink.entered
		sink.release <- struct{}{}
	}
	l.stop()

	var got []string
	for _, p := range sink.shown {
		switch p.Kind {
		case channels.ProgressText:
			got = append(got, "text:"+p.Text)
		case channels.ProgressReset:
			got = append(got, "reset")
		case channels.ProgressTool:
			got = append(got, "tool:"+p.Name)
		}
	}
	if want := "text:Hel reset tool:lookup text:Hi there"; strings.Join(got, " ") != want {
		t.Fatalf("shown %q\nwant  %q", strings.Join(got, " "), want)
	}
}
