package gateway_test

import (
	"context"
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
