package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// streamer is a channel whose replies are shown live: it records every
// call of its sinks, and its Send, in order.
type streamer struct {
	*recorder
	mu        sync.Mutex
	calls     []string // "show text:…", "show reset", "finish:…", "discard", "send:…"
	shown     strings.Builder
	failShow  bool
	failFinal bool
	notShown  bool // the sink shows nothing, as a model answering in one piece leaves it
}

func newStreamer() *streamer { return &streamer{recorder: newRecorder("live")} }

func (s *streamer) log(c string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

func (s *streamer) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

func (s *streamer) count(prefix string) int {
	n := 0
	for _, c := range s.all() {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func (s *streamer) Send(ctx context.Context, m channels.Message, r channels.Reply) error {
	s.log("send:" + r.Text)
	return s.recorder.Send(ctx, m, r)
}

func (s *streamer) StartReply(context.Context, channels.Message) (channels.ReplySink, error) {
	return &recSink{s: s}, nil
}

type recSink struct{ s *streamer }

func (k *recSink) Show(_ context.Context, p channels.Progress) (bool, error) {
	s := k.s
	if s.failShow {
		s.log("show failed")
		return false, errors.New("the platform refused the edit")
	}
	switch p.Kind {
	case channels.ProgressText:
		s.log("show text:" + p.Text)
		s.mu.Lock()
		s.shown.WriteString(p.Text)
		s.mu.Unlock()
		return true, nil
	case channels.ProgressReset:
		s.log("show reset")
		s.mu.Lock()
		s.shown.Reset()
		s.mu.Unlock()
	case channels.ProgressTool:
		s.log("show tool:" + p.Name)
	}
	return false, nil
}

func (k *recSink) Finish(ctx context.Context, r channels.Reply) error {
	if k.s.notShown {
		k.s.log("finish not shown")
		return fmt.Errorf("live: %w", channels.ErrNotShown)
	}
	if k.s.failFinal {
		k.s.log("finish failed")
		return errors.New("the stream expired")
	}
	k.s.log("finish:" + r.Text)
	// The recorder counts the delivery, so tests wait on it.
	return k.s.recorder.Send(ctx, channels.Message{}, r)
}

func (k *recSink) Discard(context.Context) error {
	k.s.log("discard")
	return nil
}

func liveRig(t *testing.T, opts ...openaitest.Option) (*rig, *streamer) {
	t.Helper()
	rg := newRig(t, gateway.Config{}, append([]openaitest.Option{openaitest.WithChunkRunes(4)}, opts...)...)
	ch := newStreamer()
	rg.gw.Register(ch)
	return rg, ch
}

func liveMsg(text string) channels.Message {
	return channels.Message{ID: "m-" + text, Channel: "live", Workspace: "T1", Chat: "C1", User: "U1", Text: text, Received: time.Now()}
}

const liveAnswer = "First roll back the deploy, then watch the error rate for ten minutes, then tell the channel."

// TestLiveReplyFinishesWithTheStoredAnswer: the answer is shown in pieces
// while it is written, then finished with exactly the stored answer, once,
// and never also sent.
func TestLiveReplyFinishesWithTheStoredAnswer(t *testing.T) {
	t.Parallel()
	rg, ch := liveRig(t, openaitest.WithChunkDelay(5*time.Millisecond))
	rg.model.Script(openaitest.Text(liveAnswer))
	rg.submit(t, liveMsg("how do I roll back?"))
	ch.wait(t, 1)
	h, err := rg.store.History(context.Background(), liveMsg("").ConversationKey())
	if err != nil || len(h) != 2 {
		t.Fatalf("history = %v, %v", h, err)
	}
	if h[1].Content != liveAnswer {
		t.Fatalf("stored %q", h[1].Content)
	}
	if n := ch.count("finish:" + liveAnswer); n != 1 || ch.count("finish") != 1 || ch.count("send") != 0 {
		t.Fatalf("calls = %q, want one finish with the stored answer and no send", ch.all())
	}
	if ch.count("show text:") < 2 {
		t.Errorf("calls = %q, want the answer shown in pieces first", ch.all())
	}
	if ch.shown.String() != liveAnswer {
		t.Errorf("shown %q, want the answer", ch.shown.String())
	}
	if got := ch.all(); got[len(got)-1] != "finish:"+liveAnswer {
		t.Errorf("last call %q, want the finish", got[len(got)-1])
	}
	if n := testutil.CollectAndCount(rg.metrics.ReplyFirstVisible); n != 1 {
		t.Errorf("first-visible series = %d, want 1", n)
	}
	if n := histogramCount(t, rg, "live"); n != 1 {
		t.Errorf("first-visible observations = %d, want 1 (the first piece shown)", n)
	}
}

// histogramCount is how many times parley_reply_first_visible_seconds
// was observed for channel.
func histogramCount(t *testing.T, rg *rig, channel string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := rg.metrics.ReplyFirstVisible.WithLabelValues(channel).(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// TestLiveReplyCutMidStreamIsResetAndFinishedOnce: a stream that dies
// halfway is retried; what was shown is reset, and the user is left with
// the answer once.
func TestLiveReplyCutMidStreamIsResetAndFinishedOnce(t *testing.T) {
	t.Parallel()
	rg, ch := liveRig(t, openaitest.WithChunkDelay(5*time.Millisecond))
	rg.model.Script(openaitest.Text(liveAnswer).CutAfter(8), openaitest.Text(liveAnswer))
	rg.submit(t, liveMsg("again?"))
	ch.wait(t, 1)
	if ch.count("show reset") != 1 || ch.count("finish:"+liveAnswer) != 1 || ch.count("send") != 0 {
		t.Fatalf("calls = %q, want a reset, then one finish", ch.all())
	}
	if ch.shown.String() != liveAnswer {
		t.Errorf("shown since the reset: %q, want the answer once", ch.shown.String())
	}
}

// TestLiveReplyApologyIsAPlainPost: a model that fails leaves nothing
// shown; the apology is sent as a notice.
func TestLiveReplyApologyIsAPlainPost(t *testing.T) {
	t.Parallel()
	rg, ch := liveRig(t)
	rg.model.Script(openaitest.Error(http.StatusServiceUnavailable), openaitest.Error(http.StatusServiceUnavailable))
	rg.submit(t, liveMsg("hello?"))
	got := ch.wait(t, 1)
	if !got[0].reply.Failed || ch.count("discard") != 1 || ch.count("finish") != 0 || ch.count("send:") != 1 {
		t.Fatalf("calls = %q, reply %+v; want a discard and the apology sent", ch.all(), got[0].reply)
	}
	if n := testutil.CollectAndCount(rg.metrics.ReplyFirstVisible); n != 0 {
		t.Errorf("first-visible observed %d times for a reply nothing of which was shown", n)
	}
}

// TestLiveReplyFallsBackToSend: a sink that cannot show progress still
// gets the final answer; one that cannot deliver it leaves it to Send, and
// the answer arrives once either way.
func TestLiveReplyFallsBackToSend(t *testing.T) {
	t.Parallel()
	t.Run("show fails", func(t *testing.T) {
		rg, ch := liveRig(t)
		ch.failShow = true
		rg.model.Script(openaitest.Text(liveAnswer))
		rg.submit(t, liveMsg("q"))
		ch.wait(t, 1)
		if ch.count("show failed") != 1 || ch.count("finish:"+liveAnswer) != 1 || ch.count("send") != 0 {
			t.Fatalf("calls = %q, want one failed show, then the finish", ch.all())
		}
	})
	t.Run("finish fails", func(t *testing.T) {
		rg, ch := liveRig(t)
		ch.failFinal = true
		rg.model.Script(openaitest.Text(liveAnswer))
		rg.submit(t, liveMsg("q"))
		ch.wait(t, 1)
		if ch.count("finish failed") != 1 || ch.count("send:"+liveAnswer) != 1 {
			t.Fatalf("calls = %q, want the failed finish, then one send", ch.all())
		}
		if rg.logs.count("live reply could not deliver the answer") != 1 {
			t.Errorf("a failed finish is not logged as a warning")
		}
	})
	// Nothing shown is no failure: the answer is sent, with no warning
	// on every answer of a workspace that only allows edits.
	t.Run("nothing shown", func(t *testing.T) {
		rg, ch := liveRig(t)
		ch.notShown = true
		rg.model.Script(openaitest.Text(liveAnswer))
		rg.submit(t, liveMsg("q"))
		ch.wait(t, 1)
		if ch.count("finish not shown") != 1 || ch.count("send:"+liveAnswer) != 1 {
			t.Fatalf("calls = %q, want the finish, then one send", ch.all())
		}
		if rg.logs.count("level=WARN") != 0 {
			t.Errorf("warned about a reply with nothing shown:\n%s", rg.logs.String())
		}
	})
}

// TestNoticeIsNeverStreamed: a command answer goes by Send; no live reply
// is started for it.
func TestNoticeIsNeverStreamed(t *testing.T) {
	t.Parallel()
	rg, ch := liveRig(t)
	rg.submit(t, liveMsg("/reset"))
	ch.wait(t, 1)
	if got := ch.all(); len(got) != 1 || !strings.HasPrefix(got[0], "send:") {
		t.Fatalf("calls = %q, want one send", got)
	}
}
