package slack

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack/slacktest"
)

func threadMsg() channels.Message {
	return channels.Message{Channel: Name, Workspace: slacktest.TeamID, Chat: "C1", Thread: "100.1",
		Meta: map[string]string{MetaTS: "100.2", MetaThreadTS: "100.1"}}
}

func TestSendPostsMrkdwnInTheThread(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if err := f.a.Send(t.Context(), threadMsg(), channels.Reply{Text: "## Answer\nIt is **42** & more: [docs](https://example.com)"}); err != nil {
		t.Fatal(err)
	}
	posts := f.slack.Posts()
	if len(posts) != 1 {
		t.Fatalf("posts %+v", posts)
	}
	want := slacktest.Post{Channel: "C1", ThreadTS: "100.1", Text: "*Answer*\nIt is *42* &amp; more: <https://example.com|docs>", TS: posts[0].TS, At: posts[0].At}
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
	t.Parallel()
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
	t.Parallel()
	tests := []struct {
		name        string
		maxAttempts int
		failures    []slacktest.Failure
		wantErr     string // "" = success; else a substring of the error
		calls       int
		codes       map[string]float64 // parley_channel_api_errors_total by code
	}{
		{name: "429 waits Retry-After", failures: []slacktest.Failure{{Status: 429, RetryAfter: "1"}},
			calls: 2, codes: map[string]float64{"ratelimited": 1}},
		{name: "ok:false ratelimited is retried", failures: []slacktest.Failure{{Error: "ratelimited"}, {Status: 502}},
			calls: 3, codes: map[string]float64{"ratelimited": 1, "http_502": 1}},
		{name: "permanent errors are not retried", failures: []slacktest.Failure{{Error: "channel_not_found"}},
			wantErr: "channel_not_found", calls: 1, codes: map[string]float64{"channel_not_found": 1}},
		{name: "bounded", maxAttempts: 3, failures: []slacktest.Failure{{Status: 503}, {Status: 503}, {Status: 503}, {Status: 503}},
			wantErr: "503", calls: 3, codes: map[string]float64{"http_503": 3}},
		{name: "Retry-After too long", failures: []slacktest.Failure{{Status: 429, RetryAfter: "3600"}},
			wantErr: "rate limit", calls: 1, codes: map[string]float64{"ratelimited": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(_ *Config, o *Options) { o.MaxAttempts = tt.maxAttempts })
			f.slack.Fail("chat.postMessage", tt.failures...)
			err := f.a.Send(t.Context(), threadMsg(), channels.Reply{Text: "hi"})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Send = %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Send = %v; want an error about %s", err, tt.wantErr)
			case err != nil && strings.Contains(err.Error(), slacktest.BotToken):
				t.Fatal("the token is in the error")
			}
			if n := f.slack.Count("chat.postMessage"); n != tt.calls {
				t.Errorf("%d calls, want %d", n, tt.calls)
			}
			if posts := len(f.slack.Posts()); (tt.wantErr == "") != (posts == 1) {
				t.Errorf("%d posts", posts)
			}
			for code, want := range tt.codes {
				if got := f.apiErrors(code); got != want {
					t.Errorf("api_errors{code=%s} = %v, want %v", code, got, want)
				}
			}
		})
	}
}

func TestTypingReaction(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// TestPostClassifiesEachFailure: Post makes one attempt and says whether
// another may succeed, with the wait Slack asked for.
func TestPostClassifiesEachFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		fail  slacktest.Failure
		retry bool
		after time.Duration
	}{
		{"rate limited", slacktest.Failure{Status: 429, RetryAfter: "7"}, true, 7 * time.Second},
		{"server error", slacktest.Failure{Status: 502}, true, 0},
		{"slack's own retryable code", slacktest.Failure{Error: "internal_error"}, true, 0},
		{"refused for good", slacktest.Failure{Error: "channel_not_found"}, false, 0},
		{"bad token", slacktest.Failure{Error: "invalid_auth"}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.slack.Fail("chat.postMessage", tt.fail)
			_, err := f.a.Post(t.Context(), threadMsg(), "hello")
			var pe *channels.PostError
			if !errors.As(err, &pe) {
				t.Fatalf("Post = %v; want a *channels.PostError", err)
			}
			if pe.Retry != tt.retry || pe.After != tt.after {
				t.Errorf("retry=%v after=%v, want %v and %v", pe.Retry, pe.After, tt.retry, tt.after)
			}
			if n := f.slack.Count("chat.postMessage"); n != 1 {
				t.Errorf("%d calls; Post must try once", n)
			}
			if strings.Contains(err.Error(), slacktest.BotToken) {
				t.Errorf("the error shows the token: %v", err)
			}
			ts, err := f.a.Post(t.Context(), threadMsg(), "hello")
			if err != nil || ts == "" || f.slack.Posts()[0].TS != ts || f.slack.Posts()[0].ThreadTS != "100.1" {
				t.Errorf("Post after recovery = %q, %v; want the ts of the post in the thread", ts, err)
			}
		})
	}
}
