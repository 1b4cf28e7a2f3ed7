package slack

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	slackapi "github.com/slack-go/slack"

	"github.com/parleyhq/parley/channels"
)

// postAnswer is what Slack answers a bot's chat.postMessage with: the
// message as stored, its blocks and the bot's profile included.
const postAnswer = `{"ok":true,"channel":"C0123ABCDEF","ts":"1700000000.123456","message":{"user":"U0BOTUSER","type":"message","ts":"1700000000.123456","bot_id":"B0123BOT","app_id":"A0123APP","text":"First roll back the deploy, then watch the error rate for ten minutes.","team":"T0123TEAM","bot_profile":{"id":"B0123BOT","deleted":false,"name":"parley","updated":1700000000,"app_id":"A0123APP","icons":{"image_36":"https://a.slack-edge.com/80588/img/plugins/app/bot_36.png","image_48":"https://a.slack-edge.com/80588/img/plugins/app/bot_48.png","image_72":"https://a.slack-edge.com/80588/img/plugins/app/service_72.png"},"team_id":"T0123TEAM"},"thread_ts":"1699999999.000100","parent_user_id":"U0ASKER","blocks":[{"type":"rich_text","block_id":"Ab1","elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"First roll back the deploy, then watch the "},{"type":"text","text":"error rate","style":{"bold":true}},{"type":"text","text":" for ten minutes."}]}]}]},"response_metadata":{"warnings":["missing_charset"]},"warning":"missing_charset"}`

// BenchmarkPost is one answer's post into a thread: the request, and
// reading Slack's answer.
func BenchmarkPost(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		io.WriteString(w, postAnswer)
	}))
	defer srv.Close()
	a, err := New(Config{BotToken: "xoxb-bench", APIURL: srv.URL + "/"}, Options{}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	m := channels.Message{Channel: Name, Workspace: "T0123TEAM", Chat: "C0123ABCDEF", Thread: "1699999999.000100",
		Meta: map[string]string{MetaThreadTS: "1699999999.000100", MetaTS: "1699999999.000100"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ts, err := a.Post(ctx, m, "First roll back the deploy, then watch the *error rate* for ten minutes.")
		if err != nil || ts != "1700000000.123456" {
			b.Fatalf("Post = %q, %v", ts, err)
		}
	}
}

// TestPostSendsWhatSlackGoSent: the post Parley writes itself is the
// request slack-go made for the same options, form field for field, and
// the ts comes back from Slack's whole answer.
func TestPostSendsWhatSlackGoSent(t *testing.T) {
	t.Parallel()
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.URL.Path+" "+r.Header.Get("Content-Type")+" "+string(body))
		io.WriteString(w, postAnswer)
	}))
	defer srv.Close()
	a, err := New(Config{BotToken: "xoxb-wire", APIURL: srv.URL + "/"}, Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	text := "a & b = <c>, 100% ünïcode\nline two"
	for _, m := range []channels.Message{
		{Chat: "C1", Meta: map[string]string{MetaThreadTS: "1699999999.000100"}},
		{Chat: "D1", DM: true},
	} {
		got = nil
		ts, err := a.Post(context.Background(), m, text)
		if err != nil || ts != "1700000000.123456" {
			t.Fatalf("Post = %q, %v", ts, err)
		}
		opts := []slackapi.MsgOption{slackapi.MsgOptionText(text, false), slackapi.MsgOptionDisableLinkUnfurl()}
		if tts := m.Meta[MetaThreadTS]; tts != "" {
			opts = append(opts, slackapi.MsgOptionTS(tts))
		}
		endpoint, values, err := slackapi.UnsafeApplyMsgOptions("xoxb-wire", m.Chat, srv.URL+"/", opts...)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.TrimPrefix(endpoint, srv.URL) + " application/x-www-form-urlencoded " + values.Encode()
		if len(got) != 1 || got[0] != want {
			t.Errorf("request\n  %q\nwant slack-go's\n  %q", got, want)
		}
	}
}
