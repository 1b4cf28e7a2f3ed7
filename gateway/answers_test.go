package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/policy"
)

// awaitedRecorder is a recorder whose sender waits for every answer, as
// the console's does.
type awaitedRecorder struct{ *recorder }

func (awaitedRecorder) AwaitsEveryReply() {}

var _ channels.Awaited = awaitedRecorder{}

// TestAwaitedSenderIsAlwaysAnswered: on a channel whose sender waits for
// each answer, a repeated refusal and a blank message are answered too
// (elsewhere the refusal is said once a day, and a blank message is left
// alone), and nothing reaches the model.
func TestAwaitedSenderIsAlwaysAnswered(t *testing.T) {
	t.Parallel()
	pol := policy.Config{Platforms: map[string]policy.PlatformPolicy{
		"console": {Level: config.Level{Access: config.Access{Users: []string{"alice"}}}},
	}}
	rg := newRig(t, gateway.Config{Policy: policy.New(pol)})
	ch := awaitedRecorder{newRecorder("console")}
	rg.gw.Register(ch)
	say := func(user, text string) {
		rg.submit(t, channels.Message{Channel: "console", Chat: "c1", User: user, DM: true, Text: text})
	}
	say("mallory", "hello?")
	say("mallory", "hello??")
	say("alice", "   ")
	got := ch.wait(t, 3)
	for i, want := range []string{"not available to you", "not available to you", "empty"} {
		if r := got[i].reply; !r.Notice || !r.Failed || !strings.Contains(r.Text, want) {
			t.Errorf("reply %d = %+v; want a failed notice saying %q", i, r, want)
		}
	}
	if n := rg.model.RequestCount(); n != 0 {
		t.Errorf("the model saw %d requests; want none", n)
	}
}

// TestModelFailureApologies: the apology a channel sends says whether to
// try again later or to tell an administrator, and is marked failed.
func TestModelFailureApologies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script []openaitest.Step
		want   string
	}{
		{"bad key", []openaitest.Step{openaitest.Error(401)}, agent.MisconfiguredReply},
		{"unknown model", []openaitest.Step{openaitest.Error(404)}, agent.MisconfiguredReply},
		{"server errors", []openaitest.Step{openaitest.Error(500), openaitest.Error(502)}, agent.ApologyReply},
		{"rate limited", []openaitest.Step{openaitest.Error(429), openaitest.Error(429)}, agent.ApologyReply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := newRig(t, gateway.Config{})
			rg.model.Script(tt.script...)
			rg.submit(t, msg("t1", "", "hello"))
			r := rg.ch.wait(t, 1)[0].reply
			if !r.Failed || r.Text != tt.want {
				t.Fatalf("reply = %+v; want failed with %q", r, tt.want)
			}
		})
	}
}

// TestBrokenTurnIsAnswered: a message whose turn fails for a reason of its
// own is dropped, and its sender is told instead of waiting for ever.
func TestBrokenTurnIsAnswered(t *testing.T) {
	t.Parallel()
	rg := newRig(t, gateway.Config{})
	m := msg("t1", "", "/skill:deploy now")
	// A history that does not decode breaks a manual skill's turn.
	key := rg.redis.Prefix + "conv:{" + m.ConversationKey() + "}:history"
	if err := rg.redis.Client.RPush(context.Background(), key, "not json").Err(); err != nil {
		t.Fatal(err)
	}
	rg.submit(t, m)
	r := rg.ch.wait(t, 1)[0].reply
	if !r.Failed || !strings.Contains(r.Text, "dropped") {
		t.Fatalf("reply = %+v; want the dropped-message notice", r)
	}
}

// TestRateLimitedAwaitedSenderIsAnswered: on a channel whose sender waits
// for each answer, every message a quota refuses is answered at once with
// the notice, marked failed (so `parley chat -m` exits non-zero), also
// within the minute in which elsewhere the user is told only once; none
// of them reaches the model.
func TestRateLimitedAwaitedSenderIsAnswered(t *testing.T) {
	t.Parallel()
	rs := newReplicas(t, 1, policy.Config{Default: config.Level{Limits: config.Limits{UserPerMinute: new(1)}}})
	ch := awaitedRecorder{newRecorder("console")}
	rs.gws[0].Register(ch)
	for i, text := range []string{"first", "second", "third", "fourth"} {
		if err := rs.gws[0].Submit(context.Background(), channels.Message{Channel: "console", Chat: "c1", User: "alice", DM: true, Text: text}); err != nil {
			t.Fatal(err)
		}
		// One at a time, as the console asks: each waits for its answer.
		ch.wait(t, i+1)
	}
	got := ch.snapshot()
	if r := got[0].reply; r.Notice || r.Failed {
		t.Errorf("reply to the first message = %+v; want the model's answer", r)
	}
	for i, s := range got[1:] {
		if r := s.reply; !r.Notice || !r.Failed || !strings.Contains(r.Text, "faster than I can answer") {
			t.Errorf("reply %d = %+v; want the failed rate notice", i+1, r)
		}
	}
	if n := rs.model.RequestCount(); n != 1 {
		t.Errorf("the model saw %d requests; want 1 (limits.user_per_minute: 1)", n)
	}
}

// unansweredRecorder is a recorder whose platform holds the sender's
// request open (an Official Account's passive reply): LeftUnanswered is
// recorded as a reply of the text leftUnanswered.
type unansweredRecorder struct{ *recorder }

const leftUnanswered = "<left unanswered>"

func (u unansweredRecorder) LeftUnanswered(ctx context.Context, m channels.Message) {
	_ = u.Send(ctx, m, channels.Reply{Text: leftUnanswered})
}

var _ channels.Unanswered = unansweredRecorder{}

// TestAQuietRefusalIsLeftUnanswered: a message a quota refuses without a
// notice (within quota.NoticeEvery of the last) is told to its channel as
// left unanswered, so that a sender's open request ends at once; the
// answered ones are not.
func TestAQuietRefusalIsLeftUnanswered(t *testing.T) {
	t.Parallel()
	rs := newReplicas(t, 1, policy.Config{Default: config.Level{Limits: config.Limits{UserPerMinute: new(1)}}})
	ch := unansweredRecorder{newRecorder("wechat_oa")}
	rs.gws[0].Register(ch)
	for i, text := range []string{"first", "second", "third"} {
		if err := rs.gws[0].Submit(context.Background(), channels.Message{Channel: "wechat_oa", Workspace: "wx1", Chat: "u1", User: "u1", DM: true, Text: text}); err != nil {
			t.Fatal(err)
		}
		ch.wait(t, i+1)
	}
	got := ch.snapshot()
	if r := got[0].reply; r.Notice || r.Text == leftUnanswered {
		t.Errorf("reply to the first message = %+v; want the model's answer", r)
	}
	if r := got[1].reply; !r.Notice || !strings.Contains(r.Text, "faster than I can answer") {
		t.Errorf("reply to the second message = %+v; want the rate notice", r)
	}
	if s := got[2]; s.reply.Text != leftUnanswered || s.msg.Text != "third" {
		t.Errorf("the third message got %+v; want it left unanswered", s)
	}
}
