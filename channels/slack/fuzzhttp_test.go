package slack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels/slack/slacktest"
)

// fuzzPost sends body, signed with the test secret at the fixture's clock
// (so the fuzzer gets past the signature to the parser), through the
// adapter's routes in process, and returns the status.
func (f *fixture) fuzzPost(t testing.TB, path, contentType string, body []byte) int {
	ts := fmt.Sprint(f.now.Unix())
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", Sign(slacktest.Secret, ts, body))
	rec := httptest.NewRecorder()
	f.mux.ServeHTTP(rec, req)
	if rec.Code < 200 || rec.Code >= 500 {
		t.Fatalf("POST %s %q: status %d", path, body, rec.Code)
	}
	return rec.Code
}

// checkSubmitted: every message handed to the gateway since before names a
// conversation it can be answered in.
func (f *fixture) checkSubmitted(t *testing.T, before int, body []byte) int {
	msgs := f.h.messages()
	for _, m := range msgs[before:] {
		if m.Channel != Name || m.Chat == "" || m.User == "" {
			t.Fatalf("%q enqueued a message with no conversation: %+v", body, m)
		}
	}
	return len(msgs) - before
}

// FuzzEventsHandler: any signed body through POST /slack/events is
// answered 2xx or 4xx without a panic, and only an event_callback carrying
// an event enqueues anything.
func FuzzEventsHandler(f *testing.F) {
	for _, p := range []map[string]any{
		slacktest.Event("EvF1", slacktest.Mention("C1", "U1", "1700000000.000100", "", "<@UBOT> hi")),
		slacktest.Event("EvF2", slacktest.Message("D1", "im", "U1", "1700000000.000200", "", "hello")),
		slacktest.Event("EvF3", slacktest.Message("C1", "channel", "U2", "1700000000.000300", "1700000000.000100", "follow-up")),
		{"type": "url_verification", "challenge": "c", "token": "t"},
		{"type": "app_rate_limited", "team_id": "T1"},
		{"type": "event_callback", "event": map[string]any{"type": "message", "subtype": "bot_message", "channel": "C1"}},
		{"type": "event_callback", "event": "not an object"},
	} {
		b, err := json.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"type":"event_callback","event":{"type":"app_mention","channel":"","user":"","text":"<@UBOT>"}}`))
	fx := newFixture(f, nil)
	// The seeds reach the parser: a signed mention is handed on.
	probe, err := json.Marshal(slacktest.Event("EvProbe", slacktest.Mention("C9", "U9", "1700000000.000900", "", "<@UBOT> probe")))
	if err != nil {
		f.Fatal(err)
	}
	fx.fuzzPost(f, EventsPath, "application/json", probe)
	if msgs := fx.h.messages(); len(msgs) != 1 || msgs[0].Chat != "C9" {
		f.Fatalf("a signed mention was not handed on: %+v", msgs)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := len(fx.h.messages())
		fx.fuzzPost(t, EventsPath, "application/json", body)
		n := fx.checkSubmitted(t, before, body)
		var env struct {
			Type  string          `json:"type"`
			Event json.RawMessage `json:"event"`
		}
		if n > 0 && (json.Unmarshal(body, &env) != nil || env.Type != "event_callback" || len(env.Event) == 0) {
			t.Fatalf("%q is no event_callback, yet %d message(s) were enqueued", body, n)
		}
	})
}

// FuzzCommandsHandler: any signed form through POST /slack/commands is
// answered 2xx or 4xx without a panic, and only the configured command
// with a user and a channel is enqueued.
func FuzzCommandsHandler(f *testing.F) {
	for _, form := range []url.Values{
		{"command": {"/parley"}, "text": {"hello"}, "user_id": {"U1"}, "channel_id": {"C1"}, "team_id": {"T1"}, "response_url": {"http://127.0.0.1:1/r"}},
		{"command": {"/parley"}, "text": {"/reset"}, "user_id": {"U1"}, "channel_id": {"D1"}, "channel_name": {"directmessage"}},
		{"command": {"/other"}, "user_id": {"U1"}, "channel_id": {"C1"}},
		{"command": {"/parley"}, "channel_id": {"C1"}},
	} {
		f.Add(form.Encode())
	}
	f.Add("%zz=1&command=/parley")
	f.Add("")
	fx := newFixture(f, nil)
	f.Fuzz(func(t *testing.T, body string) {
		before := len(fx.h.messages())
		fx.fuzzPost(t, CommandsPath, "application/x-www-form-urlencoded", []byte(body))
		n := fx.checkSubmitted(t, before, []byte(body))
		form, err := url.ParseQuery(body)
		if n > 0 && (err != nil || !strings.EqualFold(form.Get("command"), "/parley") || form.Get("user_id") == "" || form.Get("channel_id") == "") {
			t.Fatalf("%q is not the command, yet %d message(s) were enqueued", body, n)
		}
	})
}
