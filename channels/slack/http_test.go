package slack

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack/slacktest"
)

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// post sends body signed at the fixture's clock to path.
func (f *fixture) post(t *testing.T, path string, body []byte) (int, string) {
	t.Helper()
	return slacktest.Do(t, slacktest.Signed(t, f.url+path, slacktest.Secret, f.now, body))
}

func TestEventsRequestsAreVerifiedBeforeAnythingHappens(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	mention := mustJSON(t, slacktest.Event("Ev1", slacktest.Mention("C1", "U1", "100.1", "", "hello")))
	tests := []struct {
		name       string
		req        func() *http.Request
		wantStatus int
		reason     string
	}{
		{"bad signature", func() *http.Request {
			return slacktest.Signed(t, f.url+EventsPath, "not-the-secret", f.now, mention)
		}, 401, "bad_signature"},
		{"stale timestamp", func() *http.Request {
			return slacktest.Signed(t, f.url+EventsPath, slacktest.Secret, f.now.Add(-6*time.Minute), mention)
		}, 401, "stale_timestamp"},
		{"future timestamp", func() *http.Request {
			return slacktest.Signed(t, f.url+EventsPath, slacktest.Secret, f.now.Add(6*time.Minute), mention)
		}, 401, "stale_timestamp"},
		{"missing headers", func() *http.Request {
			req := slacktest.Signed(t, f.url+EventsPath, slacktest.Secret, f.now, mention)
			req.Header.Del("X-Slack-Signature")
			return req
		}, 401, "missing_headers"},
		{"signature of another body", func() *http.Request {
			req := slacktest.Signed(t, f.url+EventsPath, slacktest.Secret, f.now, mention)
			other := slacktest.Signed(t, f.url+EventsPath, slacktest.Secret, f.now, []byte(`{}`))
			req.Header.Set("X-Slack-Signature", other.Header.Get("X-Slack-Signature"))
			return req
		}, 401, "bad_signature"},
		{"malformed JSON", func() *http.Request {
			return slacktest.Signed(t, f.url+EventsPath, slacktest.Secret, f.now, []byte(`{"type":"event_callback","event":`))
		}, 400, "bad_request"},
		{"oversized body", func() *http.Request {
			big := append([]byte(`{"type":"event_callback","pad":"`), make([]byte, channels.MaxWebhookBody)...)
			return slacktest.Signed(t, f.url+EventsPath, slacktest.Secret, f.now, append(big, `"}`...))
		}, 413, "too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.rejected(tt.reason)
			status, _ := slacktest.Do(t, tt.req())
			if status != tt.wantStatus {
				t.Errorf("status %d, want %d", status, tt.wantStatus)
			}
			if got := f.rejected(tt.reason) - before; got != 1 {
				t.Errorf("rejections counted for %s: %v, want 1", tt.reason, got)
			}
		})
	}
	if msgs := f.h.messages(); len(msgs) != 0 {
		t.Fatalf("refused requests reached the gateway: %+v", msgs)
	}
	if calls := f.slack.Calls(); len(calls) != 0 {
		t.Fatalf("refused requests called Slack: %v", calls)
	}

	// The same mention, properly signed, goes through.
	if status, _ := f.post(t, EventsPath, mention); status != 200 {
		t.Fatalf("valid request: status %d", status)
	}
	if msgs := f.h.messages(); len(msgs) != 1 {
		t.Fatalf("valid request: %d messages submitted", len(msgs))
	}
}

func TestURLVerification(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	status, body := f.post(t, EventsPath, []byte(`{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`))
	if status != 200 || body != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Fatalf("url_verification: %d %q", status, body)
	}
	// An unsigned challenge is refused like everything else.
	req, _ := http.NewRequest(http.MethodPost, f.url+EventsPath, strings.NewReader(`{"challenge":"x","type":"url_verification"}`))
	if status, _ := slacktest.Do(t, req); status != 401 {
		t.Fatalf("unsigned url_verification: %d, want 401", status)
	}
}

func TestMentionBecomesAThreadMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ev := slacktest.Event("Ev100", slacktest.Mention("C1", "U1", "1700000000.000100", "", "/skill list"))
	start := time.Now()
	if status, _ := f.post(t, EventsPath, mustJSON(t, ev)); status != 200 {
		t.Fatalf("status %d", status)
	}
	t.Logf("ack after %v", time.Since(start))
	msgs := f.h.messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	m := msgs[0]
	want := channels.Message{ID: "Ev100", Channel: "slack", Workspace: slacktest.TeamID, Chat: "C1", Thread: "1700000000.000100",
		User: "U1", Text: "/skill list"}
	if m.ID != want.ID || m.Channel != want.Channel || m.Workspace != want.Workspace || m.Chat != want.Chat ||
		m.Thread != want.Thread || m.User != want.User || m.Text != want.Text || m.DM {
		t.Fatalf("message %+v\nwant %+v", m, want)
	}
	if m.Meta[MetaTS] != "1700000000.000100" || m.Meta[MetaThreadTS] != "1700000000.000100" {
		t.Fatalf("meta %v", m.Meta)
	}

	// Slack's retry of the same event carries the same id, so the
	// gateway drops it; the adapter acks it all the same.
	req := slacktest.Signed(t, f.url+EventsPath, slacktest.Secret, f.now, mustJSON(t, ev))
	req.Header.Set("X-Slack-Retry-Num", "1")
	req.Header.Set("X-Slack-Retry-Reason", "http_timeout")
	if status, _ := slacktest.Do(t, req); status != 200 {
		t.Fatalf("retry: status %d", status)
	}
	if n := len(f.h.messages()); n != 1 {
		t.Fatalf("after the retry %d messages were taken", n)
	}

	// A bare mention (the bot's name and nothing else) gets the help, as
	// an empty /parley does, not silence.
	for i, bare := range []string{"", "   ", "<@" + slacktest.BotUserID + ">"} {
		id := fmt.Sprintf("EvBare%d", i)
		f.post(t, EventsPath, mustJSON(t, slacktest.Event(id, slacktest.Mention("C1", "U3", "1700000001.00010"+fmt.Sprint(i), "", bare))))
		msgs := f.h.messages()
		if got := msgs[len(msgs)-1]; got.ID != id || got.Text != "/help" {
			t.Fatalf("bare mention %q became %+v; want /help", bare, got)
		}
	}

	// A mention inside a thread continues that thread.
	f.post(t, EventsPath, mustJSON(t, slacktest.Event("Ev101", slacktest.Mention("C1", "U2", "1700000000.000300", "1700000000.000100", "more"))))
	if msgs := f.h.messages(); len(msgs) != 5 || msgs[4].Thread != "1700000000.000100" || msgs[4].Meta[MetaTS] != "1700000000.000300" {
		t.Fatalf("mention in thread: %+v", msgs[len(msgs)-1])
	}
}

func TestWhatIsIgnored(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if err := f.a.Identify(t.Context()); err != nil {
		t.Fatal(err)
	}
	withField := func(e map[string]any, k string, v any) map[string]any { e[k] = v; return e }
	ignored := map[string]map[string]any{
		"bot mention":          withField(slacktest.Mention("C1", "U9", "1.1", "", "hi"), "bot_id", "B9"),
		"own message":          slacktest.Message("D1", "im", slacktest.BotUserID, "1.2", "", "my own answer"),
		"bot message subtype":  withField(withField(slacktest.Message("D1", "im", "", "1.3", "", "beep"), "subtype", "bot_message"), "bot_id", "B9"),
		"edit":                 withField(slacktest.Message("D1", "im", "U1", "1.4", "", "edited"), "subtype", "message_changed"),
		"delete":               withField(slacktest.Message("D1", "im", "U1", "1.5", "", ""), "subtype", "message_deleted"),
		"edited mention":       withField(slacktest.Mention("C1", "U1", "1.6", "", "hi"), "edited", map[string]any{"user": "U1", "ts": "1.7"}),
		"mention in a DM":      slacktest.Mention("D1", "U1", "1.8", "", "hi"),
		"channel top level":    slacktest.Message("C1", "channel", "U1", "1.9", "", "chatter"),
		"unfollowed thread":    slacktest.Message("C1", "channel", "U1", "2.1", "2.0", "chatter in a thread"),
		"message with mention": slacktest.Message("C1", "channel", "U1", "2.2", "2.0", "<@UBOT> hi"),
		"reaction":             {"type": "reaction_added", "user": "U1", "reaction": "+1"},
	}
	i := 0
	for name, ev := range ignored {
		i++
		if status, _ := f.post(t, EventsPath, mustJSON(t, slacktest.Event("EvIgnored"+itoa(int64(i)), ev))); status != 200 {
			t.Errorf("%s: status %d, want 200 (acked, ignored)", name, status)
		}
		if msgs := f.h.messages(); len(msgs) != 0 {
			t.Fatalf("%s reached the gateway: %+v", name, msgs)
		}
	}
}

func TestDMsAndFollowedThreads(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	post := func(id string, ev map[string]any) {
		t.Helper()
		if status, _ := f.post(t, EventsPath, mustJSON(t, slacktest.Event(id, ev))); status != 200 {
			t.Fatalf("%s: status %d", id, status)
		}
	}
	post("Ev1", slacktest.Message("D1", "im", "U1", "10.1", "", "hello &lt;there&gt;"))
	post("Ev2", slacktest.Message("D1", "im", "U1", "10.3", "10.2", "in a DM thread"))
	msgs := f.h.messages()
	if len(msgs) != 2 {
		t.Fatalf("%d messages", len(msgs))
	}
	if m := msgs[0]; !m.DM || m.Chat != "D1" || m.Thread != "" || m.Text != "hello <there>" || m.Meta[MetaThreadTS] != "" || m.Meta[MetaTS] != "10.1" {
		t.Fatalf("DM: %+v", m)
	}
	if m := msgs[1]; !m.DM || m.Thread != "10.2" || m.Meta[MetaThreadTS] != "10.2" {
		t.Fatalf("DM thread: %+v", m)
	}

	// A thread is followed once the bot was mentioned in it.
	post("Ev3", slacktest.Message("C1", "channel", "U1", "20.2", "20.1", "before the bot was asked"))
	post("Ev4", slacktest.Mention("C1", "U1", "20.3", "20.1", "join us"))
	post("Ev5", slacktest.Message("C1", "channel", "U2", "20.4", "20.1", "a follow-up"))
	msgs = f.h.messages()
	if len(msgs) != 4 {
		t.Fatalf("got %d messages; want the mention and the follow-up only", len(msgs))
	}
	if m := msgs[3]; m.Text != "a follow-up" || m.Thread != "20.1" || m.Meta[MetaThreadTS] != "20.1" || m.DM {
		t.Fatalf("follow-up: %+v", m)
	}

	// With following off, only mentions count.
	g := newFixture(t, func(c *Config, o *Options) { c.FollowThreads = false })
	for _, ev := range []map[string]any{slacktest.Mention("C1", "U1", "30.1", "", "hi"), slacktest.Message("C1", "channel", "U1", "30.2", "30.1", "follow")} {
		slacktest.Do(t, slacktest.Signed(t, g.url+EventsPath, slacktest.Secret, g.now, mustJSON(t, slacktest.Event("Ev"+ev["ts"].(string), ev))))
	}
	if n := len(g.h.messages()); n != 1 {
		t.Fatalf("follow_threads off: %d messages, want 1", n)
	}
}

func TestSubmitFailureAsksSlackToRetry(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.h.err = errors.New("redis down")
	status, _ := f.post(t, EventsPath, mustJSON(t, slacktest.Event("Ev1", slacktest.Mention("C1", "U1", "1.1", "", "hi"))))
	if status < 500 {
		t.Fatalf("status %d; want a 5xx so that Slack retries", status)
	}
}

func TestSlashCommandsOverHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	form := func(command, text, trigger string) []byte {
		return []byte(url.Values{"team_id": {slacktest.TeamID}, "channel_id": {"C1"}, "channel_name": {"general"},
			"user_id": {"U1"}, "user_name": {"ana"}, "command": {command}, "text": {text},
			"response_url": {f.slack.ResponseURL(trigger)}, "trigger_id": {trigger}}.Encode())
	}
	if status, body := f.post(t, CommandsPath, form("/parley", "/skill list", "tr1")); status != 200 || body != "" {
		t.Fatalf("slash command: %d %q", status, body)
	}
	f.post(t, CommandsPath, form("/parley", "", "tr2"))
	msgs := f.h.messages()
	if len(msgs) != 2 {
		t.Fatalf("%d messages", len(msgs))
	}
	m := msgs[0]
	if m.ID != "cmd:tr1" || m.Text != "/skill list" || m.User != "U1" || m.Chat != "C1" || m.Thread != "slash:U1" || m.Meta[MetaResponseURL] != f.slack.ResponseURL("tr1") {
		t.Fatalf("slash command message: %+v", m)
	}
	if msgs[1].Text != "/help" {
		t.Fatalf("empty command became %q, want /help", msgs[1].Text)
	}

	// Answers go to the response_url, ephemerally.
	if err := f.a.Send(t.Context(), m, channels.Reply{Text: "**Skills**: none"}); err != nil {
		t.Fatal(err)
	}
	posts := f.slack.Posts()
	if len(posts) != 1 || posts[0].ResponseURL != "/response/tr1" || posts[0].ResponseType != "ephemeral" || posts[0].Text != "*Skills*: none" {
		t.Fatalf("posts %+v", posts)
	}

	status, body := f.post(t, CommandsPath, form("/other", "x", "tr3"))
	if status != 200 || !strings.Contains(body, "/parley") || f.rejected("unknown_command") != 1 {
		t.Fatalf("unknown command: %d %q", status, body)
	}
	if status, _ := f.post(t, CommandsPath, []byte("text=no+command")); status != 400 || f.rejected("bad_request") != 1 {
		t.Fatalf("form without a command: %d", status)
	}
	req := slacktest.Signed(t, f.url+CommandsPath, "wrong", f.now, form("/parley", "hi", "tr4"))
	if status, _ := slacktest.Do(t, req); status != 401 {
		t.Fatalf("badly signed command: %d", status)
	}
	if n := len(f.h.messages()); n != 2 {
		t.Fatalf("%d messages after the refused commands", n)
	}
}

func TestNoRoutesWithoutSigningSecret(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config, o *Options) { c.SigningSecret = "" })
	status, _ := f.post(t, EventsPath, []byte(`{}`))
	if status != http.StatusNotFound {
		t.Fatalf("POST %s without a signing secret: %d, want 404", EventsPath, status)
	}
}
