package slack

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack/slacktest"
)

func threadMsg() channels.Message {
	return channels.Message{Channel: Name, Workspace: slacktest.TeamID, Chat: "C1", Thread: "100.1",
		Meta: map[string]string{MetaTS: "100.2", MetaThreadTS: "100.1"}}
}

func TestSendPostsMrkdwnInTheThread(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.a.Send(t.Context(), threadMsg(), channels.Reply{Text: "## Answer\nIt is **42** & more: [docs](https://example.com)"}); err != nil {
		t.Fatal(err)
	}
	posts := f.slack.Posts()
	if len(posts) != 1 {
		t.Fatalf("posts %+v", posts)
	}
	want := slacktest.Post{Channel: "C1", ThreadTS: "100.1", Text: "*Answer*\nIt is *42* &amp; more: <https://example.com|docs>", TS: posts[0].TS}
	if posts[0] != want {
		t.Fatalf("post %+v\nwant %+v", posts[0], want)
	}

	// A DM answer without a thread goes to the top level.
	dm := channels.Message{Channel: Name, Chat: "D1", DM: true, Meta: map[string]string{MetaTS: "5.5"}}
	if err := f.a.Send(t.Context(), dm, channels.Reply{Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if p := f.slack.Posts()[1]; p.Channel != "D1" || p.ThreadTS != "" {
		t.Fatalf("DM post %+v", p)
	}
}

func TestSendSplitsLongAnswers(t *testing.T) {
	f := newFixture(t, nil)
	var b strings.Builder
	for i := 0; i < 200; i++ {
		b.WriteString("Line of a long answer, with enough words to add up.\n\n")
	}
	if err := f.a.Send(t.Context(), threadMsg(), channels.Reply{Text: b.String()}); err != nil {
		t.Fatal(err)
	}
	posts := f.slack.Posts()
	if len(posts) < 3 {
		t.Fatalf("%d posts", len(posts))
	}
	for i, p := range posts {
		if len(p.Text) > MaxMessageBytes || p.ThreadTS != "100.1" {
			t.Errorf("post %d: %d bytes, thread %q", i, len(p.Text), p.ThreadTS)
		}
	}
}

func TestSendRetries(t *testing.T) {
	t.Run("429 waits Retry-After", func(t *testing.T) {
		f := newFixture(t, nil)
		f.slack.Fail("chat.postMessage", slacktest.Failure{Status: 429, RetryAfter: "1"})
		if err := f.a.Send(t.Context(), threadMsg(), channels.Reply{Text: "hi"}); err != nil {
			t.Fatal(err)
		}
		if n := f.slack.Count("chat.postMessage"); n != 2 || len(f.slack.Posts()) != 1 {
			t.Fatalf("%d calls, %d posts", n, len(f.slack.Posts()))
		}
		if f.apiErrors("ratelimited") != 1 {
			t.Fatal("rate limit not counted")
		}
	})
	t.Run("ok:false ratelimited is retried", func(t *testing.T) {
		f := newFixture(t, nil)
		f.slack.Fail("chat.postMessage", slacktest.Failure{Error: "ratelimited"}, slacktest.Failure{Status: 502})
		if err := f.a.Send(t.Context(), threadMsg(), channels.Reply{Text: "hi"}); err != nil {
			t.Fatal(err)
		}
		if len(f.slack.Posts()) != 1 || f.apiErrors("ratelimited") != 1 || f.apiErrors("http_502") != 1 {
			t.Fatalf("posts %d", len(f.slack.Posts()))
		}
	})
	t.Run("permanent errors are not retried", func(t *testing.T) {
		f := newFixture(t, nil)
		f.slack.Fail("chat.postMessage", slacktest.Failure{Error: "channel_not_found"})
		err := f.a.Send(t.Context(), threadMsg(), channels.Reply{Text: "hi"})
		if err == nil || !strings.Contains(err.Error(), "channel_not_found") {
			t.Fatalf("err = %v", err)
		}
		if n := f.slack.Count("chat.postMessage"); n != 1 || f.apiErrors("channel_not_found") != 1 {
			t.Fatalf("%d calls", n)
		}
		if strings.Contains(err.Error(), slacktest.BotToken) {
			t.Fatal("the token is in the error")
		}
	})
	t.Run("bounded", func(t *testing.T) {
		f := newFixture(t, func(_ *Config, o *Options) { o.MaxAttempts = 3 })
		f.slack.Fail("chat.postMessage", slacktest.Failure{Status: 503}, slacktest.Failure{Status: 503}, slacktest.Failure{Status: 503}, slacktest.Failure{Status: 503})
		if err := f.a.Send(t.Context(), threadMsg(), channels.Reply{Text: "hi"}); err == nil {
			t.Fatal("no error after every try failed")
		}
		if n := f.slack.Count("chat.postMessage"); n != 3 || f.apiErrors("http_503") != 3 {
			t.Fatalf("%d calls, want 3", n)
		}
	})
	t.Run("Retry-After too long", func(t *testing.T) {
		f := newFixture(t, nil)
		f.slack.Fail("chat.postMessage", slacktest.Failure{Status: 429, RetryAfter: "3600"})
		if err := f.a.Send(t.Context(), threadMsg(), channels.Reply{Text: "hi"}); err == nil {
			t.Fatal("waited an hour?")
		}
		if n := f.slack.Count("chat.postMessage"); n != 1 {
			t.Fatalf("%d calls", n)
		}
	})
}

func TestTypingReaction(t *testing.T) {
	f := newFixture(t, nil)
	stop := f.a.StartTyping(t.Context(), threadMsg())
	r := f.slack.Reactions()
	if len(r) != 1 || r[0] != (slacktest.Reaction{Method: "reactions.add", Channel: "C1", Timestamp: "100.2", Name: "eyes"}) {
		t.Fatalf("reactions %+v", r)
	}
	stop()
	r = f.slack.Reactions()
	if len(r) != 2 || r[1] != (slacktest.Reaction{Method: "reactions.remove", Channel: "C1", Timestamp: "100.2", Name: "eyes"}) {
		t.Fatalf("reactions %+v", r)
	}

	// A failed add is counted and leaves nothing to remove.
	f.slack.Fail("reactions.add", slacktest.Failure{Error: "missing_scope"})
	f.a.StartTyping(t.Context(), threadMsg())()
	if n := f.slack.Count("reactions.remove"); n != 1 || f.apiErrors("missing_scope") != 1 {
		t.Fatalf("remove calls %d", n)
	}
	// A message without a ts (a slash command) gets no reaction.
	f.a.StartTyping(t.Context(), channels.Message{Chat: "C1", Meta: map[string]string{MetaResponseURL: "x"}})()
	if n := f.slack.Count("reactions.add"); n != 2 {
		t.Fatalf("add calls %d", n)
	}
}

func TestIdentify(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.a.Identify(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f.a.BotUserID() != slacktest.BotUserID {
		t.Fatalf("bot user %q", f.a.BotUserID())
	}
	g := newFixture(t, func(c *Config, o *Options) { c.BotToken = "xoxb-wrong" })
	err := g.a.Identify(t.Context())
	if !IsAuthError(err) || g.apiErrors("invalid_auth") != 1 {
		t.Fatalf("wrong token: %v", err)
	}
}
