package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
)

// TestTypingReactionOnlyForSlowTurns: Slack's :eyes: reaction is added
// only to a turn still running after gateway.Config.TypingDelay, and such
// a reaction is always removed; a turn answered sooner makes no reaction
// call at all.
func TestTypingReactionOnlyForSlowTurns(t *testing.T) {
	t.Parallel()
	const thread = "1700000000.000100"
	msg := func(text string) channels.Message {
		return channels.Message{ID: "Ev-" + text, Channel: slack.Name, Workspace: slacktest.TeamID, Chat: "C1", Thread: thread,
			User: "U1", Text: text, Meta: map[string]string{slack.MetaThreadTS: thread, slack.MetaTS: thread}}
	}

	t.Run("fast", func(t *testing.T) {
		r, model, fake := redistest.New(t), openaitest.New(t), slacktest.New(t)
		// However slow this machine, the answer comes before an hour.
		rp := newSlackReplicaConfig(t, r, model, fake, false, false, gateway.Config{TypingDelay: time.Hour})
		if err := rp.gw.Submit(context.Background(), msg("quick")); err != nil {
			t.Fatal(err)
		}
		slacktest.WaitFor(t, "the answer", 30*time.Second, func() bool { return len(fake.Posts()) == 1 })
		rp.stop(t) // the turn has ended
		if rs := fake.Reactions(); len(rs) != 0 {
			t.Fatalf("reaction calls %+v for a fast turn; want none", rs)
		}
	})

	t.Run("slow", func(t *testing.T) {
		release := make(chan struct{})
		model := openaitest.New(t, openaitest.WithResponder(func(req openai.ChatCompletionRequest) openaitest.Step {
			<-release // held until the test has seen the reaction
			return openaitest.Text("slow answer")
		}))
		r, fake := redistest.New(t), slacktest.New(t)
		rp := newSlackReplicaConfig(t, r, model, fake, false, false, gateway.Config{TypingDelay: time.Millisecond})
		if err := rp.gw.Submit(context.Background(), msg("slow")); err != nil {
			t.Fatal(err)
		}
		slacktest.WaitFor(t, "the :eyes: reaction", 30*time.Second, func() bool { return fake.Count("reactions.add") == 1 })
		if n := len(fake.Posts()); n != 0 {
			t.Fatalf("%d posts while the model holds the turn", n)
		}
		close(release)
		slacktest.WaitFor(t, "the answer", 30*time.Second, func() bool { return len(fake.Posts()) == 1 })
		rp.stop(t)
		rs := fake.Reactions()
		if len(rs) != 2 || rs[0].Method != "reactions.add" || rs[1].Method != "reactions.remove" {
			t.Fatalf("reaction calls %+v; want the reaction added, then removed", rs)
		}
		for _, rc := range rs {
			if rc.Name != slack.TypingReaction || rc.Channel != "C1" || rc.Timestamp != thread {
				t.Errorf("reaction %+v; want :%s: on the message", rc, slack.TypingReaction)
			}
		}
	})
}

// typingStreamer is a streamer with a typing indicator, whose sink holds
// the finished answer for hold before delivering it.
type typingStreamer struct {
	*streamer
	hold time.Duration
}

func (s typingStreamer) StartTyping(context.Context, channels.Message) func() {
	s.log("typing start")
	return func() { s.log("typing stop") }
}

func (s typingStreamer) StartReply(ctx context.Context, m channels.Message) (channels.ReplySink, error) {
	sink, err := s.streamer.StartReply(ctx, m)
	return heldSink{ReplySink: sink, s: s}, err
}

type heldSink struct {
	channels.ReplySink
	s typingStreamer
}

func (k heldSink) Finish(ctx context.Context, r channels.Reply) error {
	// Past the typing delay, whenever the answer became visible: an
	// indicator still due would be shown by now.
	time.Sleep(k.s.hold)
	k.s.log("finishing")
	return k.ReplySink.Finish(ctx, r)
}

// TestNoTypingOnceLiveReplyVisible: once the live reply shows the answer,
// the typing indicator is not shown (a delay not yet passed is cancelled,
// two platform calls saved) or, shown already, is cleared then rather
// than when the answer is complete.
func TestNoTypingOnceLiveReplyVisible(t *testing.T) {
	t.Parallel()
	const delay = 50 * time.Millisecond
	// The answer takes longer than the delay to write, so that it is
	// shown live rather than posted whole.
	rg := newRig(t, gateway.Config{TypingDelay: delay}, openaitest.WithChunkRunes(4), openaitest.WithChunkDelay(delay/2))
	ch := typingStreamer{streamer: newStreamer(), hold: 4 * delay}
	rg.gw.Register(ch)
	rg.submit(t, liveMsg("hello there, how are you"))
	ch.wait(t, 1)
	var visible, standing bool
	calls := ch.all()
	for i, c := range calls {
		switch {
		case strings.HasPrefix(c, "show text:"):
			visible = true
		case c == "typing start":
			// The delay may pass while the first text is on its way to
			// the platform, before the gateway learns it is visible (a
			// loaded machine): the indicator is then cleared as soon as
			// it learns, the very next call. Any later is a failure.
			if visible && (i+1 == len(calls) || calls[i+1] != "typing stop") {
				t.Errorf("the typing indicator was shown after the answer was visible: %q", calls)
			}
			standing = true
		case c == "typing stop":
			standing = false
		case c == "finishing":
			if standing {
				t.Errorf("the typing indicator stands beside the visible answer until it is complete: %q", ch.all())
			}
		}
	}
	if !visible {
		t.Fatalf("the answer was not shown live: %q", calls)
	}
}
