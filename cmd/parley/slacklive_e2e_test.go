package main

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/sessions"
)

// inThread lists the messages the fake shows in a thread of channel.
func inThread(fake *slacktest.Server, channel, thread string) []slacktest.Msg {
	var out []slacktest.Msg
	for _, m := range fake.Visible() {
		if m.Channel == channel && m.ThreadTS == thread {
			out = append(out, m)
		}
	}
	return out
}

// TestSlackLiveReplyWhileTheModelWrites: over Socket Mode, a model that
// writes slowly is streamed into the thread: the first text shown is a
// beginning of the answer (shown before the answer existed), appends
// follow, the stream is stopped, and the one message left is the answer
// as stored. The first visible progress is measured.
func TestSlackLiveReplyWhileTheModelWrites(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	c := newCluster(t)
	c.model = openaitest.New(t, openaitest.WithChunkDelay(150*time.Millisecond))
	rp := c.start(t, "SLACK_APP_TOKEN="+slacktest.AppToken)
	slacktest.WaitFor(t, "a Socket Mode connection", 60*time.Second, func() bool { return c.slack.Connections() > 0 })
	const root = "1700000600.000001"
	question := "tell me, slowly and one piece at a time, how a streamed answer reaches a Slack thread"
	if err := c.slack.SendEvent("env-live", slacktest.Event("EvLive", slacktest.Mention("C1", "U1", root, "", question))); err != nil {
		t.Fatal(err)
	}
	answer := "echo: " + question
	waitPost(t, c.slack, "C1", root, answer)

	var first string
	var starts, appends, stops int
	for _, call := range c.slack.Log() {
		switch call.Method {
		case "chat.startStream":
			starts++
			first = call.Text
		case "chat.appendStream":
			appends++
		case "chat.stopStream":
			stops++
		case "chat.postMessage", "chat.update":
			t.Errorf("%s beside the stream: %q", call.Method, call.Text)
		}
	}
	if starts != 1 || stops != 1 {
		t.Fatalf("%d starts, %d stops; want one stream: %v", starts, stops, c.slack.Calls())
	}
	if first == "" || first == answer || !strings.HasPrefix(answer, first) {
		t.Errorf("the stream started with %q; want a beginning of the answer, shown while it was written", first)
	}
	t.Logf("stream: start with %d of %d characters, %d appends", len(first), len(answer), appends)
	msgs := inThread(c.slack, "C1", root)
	if len(msgs) != 1 || msgs[0].Text != answer || msgs[0].RecipientUser != "U1" || msgs[0].RecipientTeam != slacktest.TeamID {
		t.Fatalf("the thread shows %+v; want the answer once, streamed to U1", msgs)
	}
	if got := metricOf(t, rp.base, `parley_reply_first_visible_seconds_count{channel="slack"}`); got != "1" {
		t.Errorf("first visible measured %q times, want 1", got)
	}
	store := sessions.NewRedis(c.redis.Client, sessions.Options{Prefix: c.redis.Prefix})
	history, err := store.History(t.Context(), "slack:"+slacktest.TeamID+":C1:"+root)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(history); n != 2 || history[1].Content != msgs[0].Text {
		t.Errorf("stored answer %+v; want exactly what the thread shows", history)
	}
}

// TestSlackLiveReplyRefusedFallsBack: a workspace that refuses streaming
// and edits still gets each answer exactly once; the refusal of streaming
// is counted and remembered, so the next answer does not ask again.
func TestSlackLiveReplyRefusedFallsBack(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	r := redistest.New(t)
	model := openaitest.New(t, openaitest.WithChunkDelay(30*time.Millisecond))
	fake := slacktest.New(t)
	fake.Refuse("chat.startStream", "not_allowed")
	fake.Refuse("chat.update", "cant_update_message")
	srv := startSlackServe(t, r, model, fake)

	const r1, r2 = "1700000700.000001", "1700000700.000002"
	srv.event(t, slacktest.Event("EvF1", slacktest.Mention("C1", "U1", r1, "", "first question, answered in pieces")), 0)
	waitPost(t, fake, "C1", r1, "echo: first question, answered in pieces")
	srv.event(t, slacktest.Event("EvF2", slacktest.Mention("C1", "U1", r2, "", "second question")), 0)
	waitPost(t, fake, "C1", r2, "echo: second question")

	for _, th := range []struct{ root, answer string }{{r1, "echo: first question, answered in pieces"}, {r2, "echo: second question"}} {
		if msgs := inThread(fake, "C1", th.root); len(msgs) != 1 || msgs[0].Text != th.answer || msgs[0].Streamed {
			t.Errorf("thread %s shows %+v; want the answer once, posted", th.root, msgs)
		}
	}
	if n := fake.Count("chat.startStream"); n != 1 {
		t.Errorf("chat.startStream asked %d times; the refusal is remembered after the first", n)
	}
	if got := srv.metric(t, `parley_reply_stream_fallbacks_total{channel="slack",from="stream",to="update"}`); got != "1" {
		t.Errorf("stream→update counted %q, want 1", got)
	}
	if got := srv.metric(t, `parley_reply_stream_fallbacks_total{channel="slack",from="update",to="post"}`); got != "0" && got != "1" {
		t.Errorf("update→post counted %q, want at most once", got)
	}
}
