package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/sessions"
)

const slackDeadline = 30 * time.Second

// slackServe is one in-process `parley serve` with the Slack channel on.
type slackServe struct {
	base   string
	stderr *syncBuffer
}

// startSlackServe runs `parley serve` against the fake model, the fake
// Slack and Redis r (with r's prefix), and stops it at cleanup.
func startSlackServe(t *testing.T, r *redistest.Redis, model *openaitest.Server, fake *slacktest.Server) *slackServe {
	t.Helper()
	return startSlackServeWith(t, r, model, fake, "")
}

// startSlackServeWith is startSlackServe with more of the config file
// (YAML, e.g. a policies: section).
func startSlackServeWith(t *testing.T, r *redistest.Redis, model *openaitest.Server, fake *slacktest.Server, extra string) *slackServe {
	t.Helper()
	return startSlackServeHome(t, r, model, fake, extra, t.TempDir())
}

// startSlackServeHome is startSlackServeWith with PARLEY_HOME home (whose
// skills/ the test wrote).
func startSlackServeHome(t *testing.T, r *redistest.Redis, model *openaitest.Server, fake *slacktest.Server, extra, home string) *slackServe {
	t.Helper()
	addr := freeAddr(t)
	// The :eyes: reaction at once (typing_delay: 0s): its removal tells the
	// tests that a turn has ended.
	cfg := writeConfig(t, fmt.Sprintf("redis:\n  prefix: %q\ngateway:\n  shutdown_timeout: 10s\n  typing_delay: 0s\n", r.Prefix)+extra)
	getenv := mapEnv(map[string]string{
		"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_LISTEN": addr,
		"PARLEY_HOME": home, "REDIS_URL": r.URL,
		"SLACK_BOT_TOKEN": slacktest.BotToken, "SLACK_SIGNING_SECRET": slacktest.Secret, "SLACK_API_URL": fake.APIURL(),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	s := &slackServe{base: "http://" + addr, stderr: &syncBuffer{}}
	go func() { done <- run(ctx, []string{"serve", "--config", cfg}, nil, io.Discard, s.stderr, getenv) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited %d:\n%s", code, s.stderr.String())
			}
		case <-time.After(slackDeadline):
			t.Errorf("serve did not stop")
		}
	})
	waitFor(t, s.base+"/readyz", s.stderr)
	return s
}

// event posts a signed Events API payload; retry > 0 marks it as Slack's
// retry of an earlier delivery.
func (s *slackServe) event(t *testing.T, payload map[string]any, retry int) {
	t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	req := slacktest.Signed(t, s.base+"/slack/events", slacktest.Secret, time.Now(), body)
	if retry > 0 {
		req.Header.Set("X-Slack-Retry-Num", fmt.Sprint(retry))
		req.Header.Set("X-Slack-Retry-Reason", "http_timeout")
	}
	start := time.Now()
	status, respBody := slacktest.Do(t, req)
	t.Logf("POST /slack/events (%s) answered %d in %v", payload["event_id"], status, time.Since(start))
	if status != http.StatusOK {
		t.Fatalf("POST /slack/events: %d %q\n%s", status, respBody, s.stderr.String())
	}
}

// metric returns the value of one series on s's /metrics, or "" if absent.
func (s *slackServe) metric(t *testing.T, series string) string {
	t.Helper()
	return metricOf(t, s.base, series)
}

// waitPost waits for a post in channel/thread with text.
func waitPost(t *testing.T, fake *slacktest.Server, channel, thread, text string) {
	t.Helper()
	slacktest.WaitFor(t, fmt.Sprintf("%q in %s/%s", text, channel, thread), slackDeadline, func() bool {
		for _, p := range fake.Posts() {
			if p.Channel == channel && p.ThreadTS == thread && p.Text == text {
				return true
			}
		}
		return false
	})
}

func TestSlackThreadConversationDMAndBots(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	r := redistest.New(t)
	model := openaitest.New(t)
	fake := slacktest.New(t)
	srv := startSlackServe(t, r, model, fake)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix})

	// Three messages in one thread: a mention, a follow-up without a
	// mention, and a mention inside the thread.
	const root = "1700000001.000100"
	srv.event(t, slacktest.Event("EvT1", slacktest.Mention("C1", "U1", root, "", "my number is 42")), 0)
	waitPost(t, fake, "C1", root, "echo: my number is 42")
	srv.event(t, slacktest.Event("EvT2", slacktest.Message("C1", "channel", "U2", "1700000001.000200", root, "what is my number?")), 0)
	waitPost(t, fake, "C1", root, "echo: what is my number?")
	srv.event(t, slacktest.Event("EvT3", slacktest.Mention("C1", "U1", "1700000001.000300", root, "thanks")), 0)
	waitPost(t, fake, "C1", root, "echo: thanks")

	history, err := store.History(t.Context(), "slack:"+slacktest.TeamID+":C1:"+root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range history {
		got = append(got, m.Role+":"+m.Content)
	}
	want := []string{"user:my number is 42", "assistant:echo: my number is 42", "user:what is my number?",
		"assistant:echo: what is my number?", "user:thanks", "assistant:echo: thanks"}
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Fatalf("history\n  %s\nwant\n  %s", strings.Join(got, " | "), strings.Join(want, " | "))
	}
	// The third turn was asked with the whole thread as context.
	reqs := model.Requests()
	if n := len(reqs[2].Messages); n != 6 { // system + 2 earlier turns + the new message
		t.Errorf("third model request had %d messages, want 6", n)
	}
	for _, p := range fake.Posts() {
		if p.Channel != "C1" || p.ThreadTS != root {
			t.Errorf("reply outside the thread: %+v", p)
		}
	}
	slacktest.WaitFor(t, "every :eyes: to be removed", slackDeadline, func() bool { return fake.Count("reactions.remove") == 3 })
	for _, rc := range fake.Reactions() {
		if rc.Name != "eyes" || rc.Channel != "C1" {
			t.Errorf("reaction %+v", rc)
		}
	}

	// Bots (another app, our own bot user) are ignored; a DM is answered
	// at the top level of the DM. The DM conversation is ordered, so once
	// its answer is there, a bot message taken before it would have been
	// answered first.
	bot := slacktest.Message("D1", "im", "", "1700000002.000050", "", "beep from another bot")
	bot["bot_id"], bot["subtype"] = "B2", "bot_message"
	srv.event(t, slacktest.Event("EvB1", bot), 0)
	srv.event(t, slacktest.Event("EvB2", slacktest.Message("D1", "im", slacktest.BotUserID, "1700000002.000060", "", "echo: my own words")), 0)
	botMention := slacktest.Mention("C1", "U9", "1700000002.000070", "", "hi from a bot")
	botMention["bot_id"] = "B9"
	srv.event(t, slacktest.Event("EvB3", botMention), 0)
	srv.event(t, slacktest.Event("EvD1", slacktest.Message("D1", "im", "U1", "1700000002.000100", "", "hello in private")), 0)
	waitPost(t, fake, "D1", "", "echo: hello in private")
	if n := model.RequestCount(); n != 4 {
		t.Fatalf("model saw %d requests, want 4 (three thread turns and the DM)", n)
	}
	if n := len(fake.Posts()); n != 4 {
		t.Fatalf("%d posts, want 4: %+v", n, fake.Posts())
	}
	// A DM's answer is streamed as the model writes it (a live reply), so
	// its text can reach Slack before the turn is stored, which happens
	// before the stream is stopped: on a loaded machine the text is seen
	// first.
	var dm []sessions.Message
	slacktest.WaitFor(t, "the DM's turn to be stored", slackDeadline, func() bool {
		dm, err = store.History(t.Context(), "slack:"+slacktest.TeamID+":D1:")
		return err != nil || len(dm) >= 2
	})
	if err != nil || len(dm) != 2 || dm[0].Content != "hello in private" {
		t.Fatalf("DM history %+v, %v", dm, err)
	}
	if v := srv.metric(t, `parley_messages_received_total{channel="slack"}`); v != "4" {
		t.Fatalf("messages received %q, want 4: the bots must not reach the gateway", v)
	}
}

// Done when: a signed app_mention produces exactly one threaded reply even
// when Slack's retry of it arrives at a second replica.
func TestSlackRetryAtAnotherReplicaIsAnsweredOnce(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	r := redistest.New(t)
	model := openaitest.New(t)
	fake := slacktest.New(t)
	a := startSlackServe(t, r, model, fake)
	b := startSlackServe(t, r, model, fake)

	const ts = "1700000009.000100"
	ev := slacktest.Event("EvRetry1", slacktest.Mention("C7", "U1", ts, "", "hello once"))
	a.event(t, ev, 0)
	b.event(t, ev, 1) // Slack's http_timeout retry, at the other replica

	waitPost(t, fake, "C7", ts, "echo: hello once")
	slacktest.WaitFor(t, "replica B to drop the retry", slackDeadline, func() bool {
		return b.metric(t, `parley_messages_deduplicated_total{channel="slack"}`) == "1"
	})
	// B dropped it at intake, so nothing more can come of it; A's turn is
	// complete once its reaction is gone.
	slacktest.WaitFor(t, "the turn to finish", slackDeadline, func() bool { return fake.Count("reactions.remove") == 1 })
	var inThread int
	for _, p := range fake.Posts() {
		if p.Channel == "C7" && p.ThreadTS == ts {
			inThread++
		}
	}
	if inThread != 1 || len(fake.Posts()) != 1 || model.RequestCount() != 1 {
		t.Fatalf("%d replies in the thread, %d posts, %d model requests; want exactly one of each", inThread, len(fake.Posts()), model.RequestCount())
	}
	if v := a.metric(t, `parley_messages_deduplicated_total{channel="slack"}`); v != "" && v != "0" {
		t.Fatalf("replica A deduplicated %s messages", v)
	}
}
