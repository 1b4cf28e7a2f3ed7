package slack

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack/slacktest"
)

// liveFixture is an adapter whose live replies are not paced, so that a
// test decides what each Show shows.
func liveFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixture(t, func(_ *Config, o *Options) {
		o.AppendEvery, o.UpdateEvery = time.Nanosecond, time.Nanosecond
	})
}

// liveMsg is a mention in a thread of C1 in the fake's workspace.
func liveMsg(team string) channels.Message {
	m := threadMsg()
	m.Workspace, m.User = team, "U1"
	return m
}

// answer plays the gateway: the reply's live sink is shown the pieces in
// order, then finished with their whole; an answer the sink could not
// deliver is sent, as the gateway does. It returns what Show reported.
func answer(t *testing.T, a *Adapter, m channels.Message, pieces ...string) (visible []bool, showErr error) {
	t.Helper()
	ctx := context.Background()
	sink, err := a.StartReply(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	whole := strings.Join(pieces, "")
	if sink == nil {
		if err := a.Send(ctx, m, channels.Reply{Text: whole}); err != nil {
			t.Fatal(err)
		}
		return nil, nil
	}
	for _, p := range pieces {
		v, err := sink.Show(ctx, channels.Progress{Kind: channels.ProgressText, Text: p})
		visible = append(visible, v)
		if err != nil {
			showErr = err
			break // the gateway stops showing
		}
	}
	if err := sink.Finish(ctx, channels.Reply{Text: whole}); err != nil {
		if err := a.Send(ctx, m, channels.Reply{Text: whole}); err != nil {
			t.Fatal(err)
		}
	}
	return visible, showErr
}

func (f *fixture) fallbacks(from, to string) float64 {
	return testutil.ToFloat64(f.m.ReplyStreamFallbacks.WithLabelValues(Name, from, to))
}

// methods lists the logged calls' methods.
func methods(calls []slacktest.Call) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Method)
	}
	return out
}

// onlyVisible checks that the thread shows exactly one message, with text.
func onlyVisible(t *testing.T, fake *slacktest.Server, text string) slacktest.Msg {
	t.Helper()
	vis := fake.Visible()
	if len(vis) != 1 {
		t.Fatalf("%d messages shown, want exactly one: %+v", len(vis), vis)
	}
	if vis[0].Text != text || vis[0].Streaming {
		t.Fatalf("the message shows %q (streaming %v), want the answer %q", vis[0].Text, vis[0].Streaming, text)
	}
	return vis[0]
}

// TestLiveReplyStreams: an answer arrives as start, appends, stop, in the
// thread, to the asking user of the workspace, and its text is the answer
// exactly; the status says the bot is thinking before the first text, and
// names the tool it runs.
func TestLiveReplyStreams(t *testing.T) {
	t.Parallel()
	f := liveFixture(t)
	m := liveMsg(slacktest.TeamID)
	ctx := context.Background()
	sink, err := f.a.StartReply(ctx, m)
	if err != nil || sink == nil {
		t.Fatalf("StartReply = %v, %v; want a sink", sink, err)
	}
	if n := len(f.slack.Log()); n != 0 {
		t.Fatalf("StartReply made %d calls; want none until the turn outlasts the typing delay", n)
	}
	if v, err := sink.Show(ctx, channels.Progress{Kind: channels.ProgressWaiting}); err != nil || !v {
		t.Fatalf("Show(waiting) = %v, %v; want the status shown", v, err)
	}
	if v, err := sink.Show(ctx, channels.Progress{Kind: channels.ProgressTool, Name: "web_search"}); err != nil || !v {
		t.Fatalf("Show(tool) = %v, %v; want the status shown", v, err)
	}
	pieces := []string{"The **answer** ", "is written ", "piece by piece,\n", "and ends here."}
	for i, p := range pieces {
		v, err := sink.Show(ctx, channels.Progress{Kind: channels.ProgressText, Text: p})
		if err != nil || !v {
			t.Fatalf("Show(text %d) = %v, %v; want it shown", i, v, err)
		}
	}
	whole := strings.Join(pieces, "")
	if err := sink.Finish(ctx, channels.Reply{Text: whole}); err != nil {
		t.Fatal(err)
	}
	got := methods(f.slack.Log())
	want := []string{"assistant.threads.setStatus", "assistant.threads.setStatus", "chat.startStream",
		"chat.appendStream", "chat.appendStream", "chat.appendStream", "chat.stopStream"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("calls %v\nwant  %v", got, want)
	}
	log := f.slack.Log()
	if log[0].Text != StatusThinking || log[1].Text != "is running web_search…" || log[0].TS != m.Thread {
		t.Errorf("statuses %q, %q in %s; want thinking, then the tool, in the thread", log[0].Text, log[1].Text, log[0].TS)
	}
	msg := onlyVisible(t, f.slack, whole)
	if !msg.Streamed || msg.ThreadTS != m.Thread || msg.RecipientUser != m.User || msg.RecipientTeam != slacktest.TeamID {
		t.Errorf("message %+v; want a stream in thread %s to %s of %s", msg, m.Thread, m.User, slacktest.TeamID)
	}
	if posts := f.slack.Posts(); len(posts) != 1 || posts[0].Text != whole {
		t.Errorf("posts %+v; want the streamed answer once", posts)
	}
	if n := f.slack.Count("chat.postMessage") + f.slack.Count("chat.update"); n != 0 {
		t.Errorf("%d posts or edits beside the stream", n)
	}
}

// TestLiveReplyStreamRefusedThenEditsRefused: the workspace refuses
// chat.startStream, so the reply is one message edited as it grows; then
// it refuses chat.update too, so the partial message is deleted and the
// answer posted plainly, once. Both moves are counted and remembered: the
// next reply is not streamed nor edited, only posted.
func TestLiveReplyStreamRefusedThenEditsRefused(t *testing.T) {
	t.Parallel()
	f := liveFixture(t)
	f.slack.Refuse("chat.startStream", "not_allowed")
	m := liveMsg(slacktest.TeamID)

	// Edits work: the answer grows in one message.
	visible, err := answer(t, f.a, m, "first ", "second ", "third")
	if err != nil || !visible[0] {
		t.Fatalf("visible %v, err %v; want the first piece shown", visible, err)
	}
	onlyVisible(t, f.slack, "first second third")
	if f.slack.Count("chat.postMessage") != 1 || f.slack.Count("chat.update") < 1 {
		t.Fatalf("calls %v; want one post, then edits", f.slack.Calls())
	}
	if f.fallbacks("stream", "update") != 1 {
		t.Errorf("stream→update counted %v times, want 1", f.fallbacks("stream", "update"))
	}

	// The next reply starts edited, without asking for a stream again.
	starts := f.slack.Count("chat.startStream")
	f.slack.Refuse("chat.update", "cant_update_message")
	m2 := m
	m2.Thread, m2.Meta = "1700000000.000200", map[string]string{MetaTS: "1700000000.000200", MetaThreadTS: "1700000000.000200"}
	answer(t, f.a, m2, "one ", "two ", "three")
	if n := f.slack.Count("chat.startStream"); n != starts {
		t.Errorf("chat.startStream called again (%d → %d); the workspace's refusal is remembered", starts, n)
	}
	var inThread []slacktest.Msg
	for _, v := range f.slack.Visible() {
		if v.ThreadTS == m2.Thread {
			inThread = append(inThread, v)
		}
	}
	if len(inThread) != 1 || inThread[0].Text != "one two three" {
		t.Fatalf("thread shows %+v; want the answer once, the partial message deleted", inThread)
	}
	if f.fallbacks("update", "post") != 1 {
		t.Errorf("update→post counted %v times, want 1", f.fallbacks("update", "post"))
	}

	// Now the workspace's replies are posted when complete.
	sink, err := f.a.StartReply(context.Background(), m2)
	if sink != nil || err != nil {
		t.Errorf("StartReply = %v, %v; want no live reply in a workspace refusing streams and edits", sink, err)
	}
	// Another workspace still streams.
	f.slack.Heal("chat.startStream")
	before := f.slack.Count("chat.startStream")
	answer(t, f.a, liveMsg("T0OTHER"), "streamed ", "elsewhere")
	if f.slack.Count("chat.startStream") != before+1 {
		t.Errorf("another workspace did not stream: calls %v", f.slack.Calls())
	}

	// An hour on, the first workspace is asked again: it may have been
	// granted the scope since.
	f.now = f.now.Add(RefusalMemory)
	before = f.slack.Count("chat.startStream")
	answer(t, f.a, m, "asked ", "again")
	if f.slack.Count("chat.startStream") != before+1 {
		t.Errorf("the refusal was still remembered after RefusalMemory: calls %v", f.slack.Calls())
	}
}

// TestLiveReplyFailsHalfway: appends fail for good half way through; the
// single streamed message is stopped and edited to the whole answer: one
// message, complete, no second copy.
func TestLiveReplyFailsHalfway(t *testing.T) {
	t.Parallel()
	f := liveFixture(t)
	f.slack.Fail("chat.appendStream", slacktest.Failure{Pass: true},
		slacktest.Failure{Status: 500}, slacktest.Failure{Status: 500}, slacktest.Failure{Status: 500})
	pieces := []string{"one ", "two ", "three ", "four ", "five"}
	_, err := answer(t, f.a, liveMsg(slacktest.TeamID), pieces...)
	if err == nil {
		t.Fatal("Show did not report the failed stream")
	}
	onlyVisible(t, f.slack, strings.Join(pieces, ""))
	if f.fallbacks("stream", "update") != 1 {
		t.Errorf("stream→update counted %v times, want 1", f.fallbacks("stream", "update"))
	}
	if f.slack.Count("chat.postMessage") != 0 {
		t.Errorf("a second copy was posted: %v", f.slack.Calls())
	}
}

// TestLiveReplyFailsHalfwayLong: a long answer whose stream breaks cannot
// be one edited message: the partial stream is deleted and the answer is
// posted in its parts, once.
func TestLiveReplyFailsHalfwayLong(t *testing.T) {
	t.Parallel()
	f := liveFixture(t)
	f.slack.Fail("chat.appendStream", slacktest.Failure{Pass: true},
		slacktest.Failure{Error: "message_not_in_streaming_state"})
	line := strings.Repeat("x", 99) + "\n"
	pieces := []string{strings.Repeat(line, 20), strings.Repeat(line, 20), strings.Repeat(line, 40)}
	whole := strings.Join(pieces, "")
	answer(t, f.a, liveMsg(slacktest.TeamID), pieces...)
	parts := f.a.Parts(liveMsg(slacktest.TeamID), channels.Reply{Text: whole})
	vis := f.slack.Visible()
	if len(vis) != len(parts) || len(parts) < 2 {
		t.Fatalf("%d messages shown, want the answer's %d parts: %+v", len(vis), len(parts), vis)
	}
	for i, v := range vis {
		if v.Text != parts[i] || v.Streamed {
			t.Errorf("message %d shows %d bytes (streamed %v), want part %d", i, len(v.Text), v.Streamed, i)
		}
	}
	if f.fallbacks("stream", "post") != 1 {
		t.Errorf("stream→post counted %v times, want 1", f.fallbacks("stream", "post"))
	}
}

// TestLiveReplyRollsOver: past MaxStreamChars the answer goes on in a new
// streamed message; each holds at most the limit, every one is stopped,
// and together they are the answer.
func TestLiveReplyRollsOver(t *testing.T) {
	t.Parallel()
	f := liveFixture(t)
	line := strings.Repeat("y", 119) + "\n"
	var pieces []string
	for range 30 {
		pieces = append(pieces, strings.Repeat(line, 10)) // 1,200 characters each
	}
	whole := strings.Join(pieces, "")
	answer(t, f.a, liveMsg(slacktest.TeamID), pieces...)
	vis := f.slack.Visible()
	if len(vis) != 3 {
		t.Fatalf("%d messages, want 36,000 characters in 3 streamed messages", len(vis))
	}
	var got strings.Builder
	for i, v := range vis {
		if !v.Streamed || v.Streaming || len([]rune(v.Text)) > MaxStreamChars {
			t.Errorf("message %d: streamed %v, still streaming %v, %d characters", i, v.Streamed, v.Streaming, len([]rune(v.Text)))
		}
		got.WriteString(v.Text)
	}
	if got.String() != whole {
		t.Error("the streamed messages together are not the answer")
	}
}

// TestLiveReplyWithdrawn: text withdrawn (it led to a tool call) is
// removed, and the answer that follows is the one message shown.
func TestLiveReplyWithdrawn(t *testing.T) {
	t.Parallel()
	f := liveFixture(t)
	ctx := context.Background()
	sink, _ := f.a.StartReply(ctx, liveMsg(slacktest.TeamID))
	for _, p := range []channels.Progress{
		{Kind: channels.ProgressText, Text: "Let me look"},
		{Kind: channels.ProgressReset},
		{Kind: channels.ProgressTool, Name: "search"},
		{Kind: channels.ProgressText, Text: "Found it: "},
		{Kind: channels.ProgressText, Text: "42."},
	} {
		if _, err := sink.Show(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.Finish(ctx, channels.Reply{Text: "Found it: 42."}); err != nil {
		t.Fatal(err)
	}
	onlyVisible(t, f.slack, "Found it: 42.")
}

// TestLiveReplyDiscarded: a reply replaced by a notice leaves nothing.
func TestLiveReplyDiscarded(t *testing.T) {
	t.Parallel()
	f := liveFixture(t)
	ctx := context.Background()
	sink, _ := f.a.StartReply(ctx, liveMsg(slacktest.TeamID))
	sink.Show(ctx, channels.Progress{Kind: channels.ProgressText, Text: "half an answer"})
	if err := sink.Discard(ctx); err != nil {
		t.Fatal(err)
	}
	if vis := f.slack.Visible(); len(vis) != 0 {
		t.Fatalf("a discarded reply left %+v", vis)
	}
}

// TestLiveReplyNeutralisesMentions: model text cannot page a channel
// through a stream, even when the broadcast is split across pieces.
func TestLiveReplyNeutralisesMentions(t *testing.T) {
	t.Parallel()
	f := liveFixture(t)
	answer(t, f.a, liveMsg(slacktest.TeamID), "hey <", "!channel> and <@U", "123> and <#C1>")
	for _, c := range f.slack.Log() {
		for _, bad := range []string{"<!", "<@", "<#"} {
			if strings.Contains(c.Text, bad) {
				t.Errorf("%s sent %q: a control sequence", c.Method, c.Text)
			}
		}
	}
	onlyVisible(t, f.slack, "hey <\u200b!channel> and <\u200b@U123> and <\u200b#C1>")
}

// TestLiveReplyEditsArePaced: as one edited message, edits come at most
// once per UpdateEvery (measured from the fake's receive times: a busy
// machine only widens the gaps).
func TestLiveReplyEditsArePaced(t *testing.T) {
	t.Parallel()
	const every = 150 * time.Millisecond
	f := newFixture(t, func(_ *Config, o *Options) { o.UpdateEvery = every })
	f.slack.Refuse("chat.startStream", "unknown_method")
	m := liveMsg(slacktest.TeamID)
	ctx := context.Background()
	sink, _ := f.a.StartReply(ctx, m)
	var whole strings.Builder
	for i := range 40 {
		p := strings.Repeat(string(rune('a'+i%26)), 5) + " "
		whole.WriteString(p)
		sink.Show(ctx, channels.Progress{Kind: channels.ProgressText, Text: p})
		time.Sleep(10 * time.Millisecond)
	}
	if err := sink.Finish(ctx, channels.Reply{Text: whole.String()}); err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for _, c := range f.slack.Log() {
		if c.Method != "chat.postMessage" && c.Method != "chat.update" {
			continue
		}
		if !last.IsZero() && c.At.Sub(last) < every {
			t.Errorf("%s %v after the previous edit; want at least %v", c.Method, c.At.Sub(last), every)
		}
		last = c.At
	}
	onlyVisible(t, f.slack, strings.TrimSpace(whole.String()))
}

// TestLiveReplyNotStreamed: a slash command's ephemeral answer has no
// live reply; a top-level DM answer is one edited message, not a stream.
func TestLiveReplyNotStreamed(t *testing.T) {
	t.Parallel()
	f := liveFixture(t)
	cmd := liveMsg(slacktest.TeamID)
	cmd.Meta = map[string]string{MetaResponseURL: f.slack.ResponseURL("x")}
	if sink, err := f.a.StartReply(context.Background(), cmd); sink != nil || err != nil {
		t.Errorf("StartReply(slash command) = %v, %v; want none", sink, err)
	}
	dm := channels.Message{Channel: Name, Workspace: slacktest.TeamID, Chat: "D1", User: "U1", DM: true,
		Meta: map[string]string{MetaTS: "1700000000.000300"}}
	answer(t, f.a, dm, "top ", "level")
	if n := f.slack.Count("chat.startStream"); n != 0 {
		t.Errorf("a top-level answer was streamed (%d starts)", n)
	}
	if msg := onlyVisible(t, f.slack, "top level"); msg.ThreadTS != "" {
		t.Errorf("the DM answer went into thread %q", msg.ThreadTS)
	}
}

// TestLiveReplyStatusRefusedIsRemembered: a workspace that refuses
// setStatus is not asked again; the answer streams regardless.
func TestLiveReplyStatusRefusedIsRemembered(t *testing.T) {
	t.Parallel()
	f := liveFixture(t)
	f.slack.Refuse("assistant.threads.setStatus", "invalid_thread_ts")
	for _, text := range []string{"a", "b"} {
		ctx := context.Background()
		sink, err := f.a.StartReply(ctx, liveMsg(slacktest.TeamID))
		if err != nil || sink == nil {
			t.Fatalf("StartReply = %v, %v", sink, err)
		}
		if v, _ := sink.Show(ctx, channels.Progress{Kind: channels.ProgressWaiting}); v {
			t.Error("a refused status reported shown")
		}
		if _, err := sink.Show(ctx, channels.Progress{Kind: channels.ProgressText, Text: text}); err != nil {
			t.Fatal(err)
		}
		if err := sink.Finish(ctx, channels.Reply{Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.slack.Count("assistant.threads.setStatus"); n != 1 {
		t.Errorf("setStatus asked %d times, want once", n)
	}
	if n := f.slack.Count("chat.stopStream"); n != 2 {
		t.Errorf("%d streams completed, want 2", n)
	}
}

// TestLiveReplyAppendsArePaced: appends to a stream come at most once per
// AppendEvery, the text in between merged (gaps measured from the fake's
// receive times), and the stream still ends with the whole answer.
func TestLiveReplyAppendsArePaced(t *testing.T) {
	t.Parallel()
	const every = 100 * time.Millisecond
	f := newFixture(t, func(_ *Config, o *Options) { o.AppendEvery = every })
	ctx := context.Background()
	sink, _ := f.a.StartReply(ctx, liveMsg(slacktest.TeamID))
	var whole strings.Builder
	for i := range 30 {
		p := strings.Repeat(string(rune('a'+i%26)), 3) + " "
		whole.WriteString(p)
		if _, err := sink.Show(ctx, channels.Progress{Kind: channels.ProgressText, Text: p}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := sink.Finish(ctx, channels.Reply{Text: whole.String()}); err != nil {
		t.Fatal(err)
	}
	var last time.Time
	appends := 0
	for _, c := range f.slack.Log() {
		if c.Method != "chat.startStream" && c.Method != "chat.appendStream" {
			continue
		}
		if c.Method == "chat.appendStream" {
			appends++
		}
		if !last.IsZero() && c.At.Sub(last) < every {
			t.Errorf("%s %v after the previous; want at least %v", c.Method, c.At.Sub(last), every)
		}
		last = c.At
	}
	if appends >= 29 {
		t.Errorf("%d appends for 30 pieces: nothing was merged", appends)
	}
	onlyVisible(t, f.slack, whole.String())
}

// TestLiveReplyNothingShownIsNotAFailure: a model that answers in one
// piece shows nothing of an edited reply before it is finished; Finish
// says so with channels.ErrNotShown (the gateway then posts the answer
// without a warning), and has made no call.
func TestLiveReplyNothingShownIsNotAFailure(t *testing.T) {
	t.Parallel()
	f := liveFixture(t)
	f.slack.Refuse("chat.startStream", "not_allowed")
	m := liveMsg(slacktest.TeamID)
	answer(t, f.a, m, "learn ", "the mode") // the workspace is now edited, not streamed
	m.Thread, m.Meta = "1700000000.000400", map[string]string{MetaTS: "1700000000.000400", MetaThreadTS: "1700000000.000400"}
	sink, err := f.a.StartReply(context.Background(), m)
	if sink == nil || err != nil {
		t.Fatalf("StartReply = %v, %v; want an edited live reply", sink, err)
	}
	calls := len(f.slack.Calls()) // the status line, if any
	err = sink.Finish(context.Background(), channels.Reply{Text: "whole"})
	if !errors.Is(err, channels.ErrNotShown) {
		t.Fatalf("Finish with nothing shown = %v; want channels.ErrNotShown", err)
	}
	if n := len(f.slack.Calls()); n != calls {
		t.Errorf("Finish with nothing shown made calls: %v", f.slack.Calls()[calls:])
	}
}

// TestUnshownSaysWhetherFinishLeavesThePost: a live reply's Unshown,
// asked after its last Show, is true exactly when Finish then answers
// channels.ErrNotShown (the gateway posts the reply, and reserves that
// post's slot ahead on the strength of it).
func TestUnshownSaysWhetherFinishLeavesThePost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		edited bool     // the workspace refuses streams: the reply is edited into place
		shown  []string // text shown before Finish
		want   bool
	}{
		{"edited, nothing shown", true, nil, true},
		{"edited, text shown", true, []string{"half of "}, false},
		{"streamed, nothing shown", false, nil, true},
		{"streamed, text shown", false, []string{"half of "}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := liveFixture(t)
			m := liveMsg(slacktest.TeamID)
			if tt.edited {
				f.slack.Refuse("chat.startStream", "not_allowed")
				answer(t, f.a, m, "learn ", "the mode")
				m.Thread, m.Meta = "1700000000.000400", map[string]string{MetaTS: "1700000000.000400", MetaThreadTS: "1700000000.000400"}
			}
			ctx := context.Background()
			sink, err := f.a.StartReply(ctx, m)
			if sink == nil || err != nil {
				t.Fatalf("StartReply = %v, %v; want a live reply", sink, err)
			}
			for _, p := range tt.shown {
				if _, err := sink.Show(ctx, channels.Progress{Kind: channels.ProgressText, Text: p}); err != nil {
					t.Fatal(err)
				}
			}
			u, ok := sink.(channels.Unshown)
			if !ok {
				t.Fatal("the live reply does not implement channels.Unshown")
			}
			got := u.Unshown()
			err = sink.Finish(ctx, channels.Reply{Text: "half of the answer"})
			if got != tt.want || got != errors.Is(err, channels.ErrNotShown) {
				t.Fatalf("Unshown = %v, then Finish = %v; want Unshown %v, and true exactly when Finish answers ErrNotShown", got, err, tt.want)
			}
		})
	}
}

// TestLiveReplyAnswerWithoutTSIsARefusal: a chat.startStream (then a
// chat.postMessage of the edited mode) answered ok but without its ts is a
// refusal of that method: the reply moves to the next mode and the answer
// is shown once, never a chat.stopStream with an empty ts.
func TestLiveReplyAnswerWithoutTSIsARefusal(t *testing.T) {
	t.Parallel()
	f := liveFixture(t)
	f.slack.Fail("chat.startStream", slacktest.Failure{Bare: true})
	m := liveMsg(slacktest.TeamID)

	answer(t, f.a, m, "first ", "second")
	onlyVisible(t, f.slack, "first second")
	for _, c := range f.slack.Log() {
		if c.Method != "chat.startStream" && c.TS == "" {
			t.Errorf("%s called with no ts: %+v", c.Method, c)
		}
	}
	if f.fallbacks("stream", "update") != 1 {
		t.Errorf("stream→update counted %v times, want 1", f.fallbacks("stream", "update"))
	}
	// Remembered like any refusal: the next reply does not ask again.
	starts := f.slack.Count("chat.startStream")
	f.slack.Fail("chat.postMessage", slacktest.Failure{Bare: true})
	m2 := m
	m2.Thread, m2.Meta = "1700000000.000300", map[string]string{MetaTS: "1700000000.000300", MetaThreadTS: "1700000000.000300"}
	answer(t, f.a, m2, "one ", "two")
	if n := f.slack.Count("chat.startStream"); n != starts {
		t.Errorf("chat.startStream asked again (%d → %d) after answering without a ts", starts, n)
	}
	if f.fallbacks("update", "post") != 1 {
		t.Errorf("update→post counted %v times, want 1: a post without its ts cannot be edited", f.fallbacks("update", "post"))
	}
	var inThread []string
	for _, v := range f.slack.Visible() {
		if v.ThreadTS == m2.Thread {
			inThread = append(inThread, v.Text)
		}
	}
	if len(inThread) != 1 || inThread[0] != "one two" {
		t.Fatalf("thread shows %q; want the answer once", inThread)
	}
}
