package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/internal/redistest"
)

const (
	e2eFeishuToken = "verify-me"
	e2eFeishuKey   = "encrypt-me"
)

// feishuServe starts `parley serve` in-process against a fake model, a fake
// Feishu Open API and a real Redis. extra adds or overrides environment.
type feishuServe struct {
	base   string
	api    *feishutest.Server
	model  *openaitest.Server
	stderr *syncBuffer
	stop   func() int
	// redis is the server and prefix serve was given.
	redis *redistest.Redis
}

func startFeishuServe(t *testing.T, extra map[string]string) *feishuServe {
	t.Helper()
	return startFeishuServeYAML(t, "", extra)
}

// startFeishuServeYAML is startFeishuServe with more of the config file.
func startFeishuServeYAML(t *testing.T, yaml string, extra map[string]string) *feishuServe {
	t.Helper()
	return startFeishuServeOn(t, feishutest.New(t), yaml, extra)
}

// startFeishuServeOn is startFeishuServeYAML against api, a fake the
// test has set up first (more apps in it).
func startFeishuServeOn(t *testing.T, api *feishutest.Server, yaml string, extra map[string]string) *feishuServe {
	t.Helper()
	r := redistest.New(t)
	model := openaitest.New(t)
	addr := freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf("redis:\n  prefix: %q\n", r.Prefix)+yaml)
	env := map[string]string{
		"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_LISTEN": addr, "PARLEY_HOME": t.TempDir(),
		"REDIS_URL":     r.URL,
		"FEISHU_APP_ID": "cli_e2e_" + strings.ReplaceAll(t.Name(), "/", "_"), "FEISHU_APP_SECRET": "app-secret",
		"FEISHU_VERIFICATION_TOKEN": e2eFeishuToken, "FEISHU_ENCRYPT_KEY": e2eFeishuKey,
		"FEISHU_BASE_URL": api.URL, "FEISHU_MODE": "webhook",
	}
	for k, v := range extra {
		env[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	s := &feishuServe{base: "http://" + addr, api: api, model: model, stderr: &syncBuffer{}, redis: r}
	go func() { done <- run(ctx, []string{"serve", "--config", cfg}, nil, io.Discard, s.stderr, mapEnv(env)) }()
	stopped := false
	var code int
	s.stop = func() int {
		if stopped {
			return code
		}
		stopped = true
		cancel()
		select {
		case code = <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not stop; stderr:\n%s", s.stderr.String())
		}
		return code
	}
	t.Cleanup(func() { s.stop() })
	waitFor(t, s.base+"/healthz", s.stderr)
	return s
}

// post sends an encrypted, signed callback.
func (s *feishuServe) post(t *testing.T, event []byte) int {
	t.Helper()
	req := feishutest.Request(s.base+"/feishu/events", feishutest.Encrypted(event, e2eFeishuKey), e2eFeishuKey, time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Logf("callback answered %d %s", resp.StatusCode, body)
	}
	return resp.StatusCode
}

func (s *feishuServe) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(s.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func pollUntil(t *testing.T, what string, stderr *syncBuffer, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; stderr:\n%s", what, stderr.String())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func groupEvent(id, sender, text string, mentionBot bool) []byte {
	m := feishutest.Message{Token: e2eFeishuToken, MessageID: id, ChatID: "oc_team", ChatType: "group", Sender: sender, Content: feishutest.Text(text)}
	if mentionBot {
		m.Content = feishutest.Text("@_user_1 " + text)
		m.Mentions = []feishutest.Mention{{Key: "@_user_1", OpenID: feishutest.BotOpenID, Name: "Parley"}}
	}
	return feishutest.Event(m)
}

func TestFeishuMentionGetsExactlyOneThreadedReply(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	// The typing reaction at once: its removal tells that the turn ended.
	s := startFeishuServeYAML(t, "gateway:\n  typing_delay: 0s\n", nil)

	// Un-mentioned chatter in the group, then the question, then Feishu
	// pushing the question again.
	if code := s.post(t, groupEvent("om_chat", "ou_bob", "anyone for lunch?", false)); code != 200 {
		t.Fatalf("un-mentioned message: %d", code)
	}
	if code := s.post(t, groupEvent("om_q", "ou_alice", "what is Parley?", true)); code != 200 {
		t.Fatalf("mention: %d", code)
	}
	if code := s.post(t, groupEvent("om_q", "ou_alice", "what is Parley?", true)); code != 200 {
		t.Fatalf("re-push: %d", code)
	}
	// A forged callback is refused and counted.
	forged := feishutest.Request(s.base+"/feishu/events", feishutest.Encrypted(groupEvent("om_f", "ou_eve", "hi", true), e2eFeishuKey), "wrong-key", time.Now())
	if resp, err := http.DefaultClient.Do(forged); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged callback: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	pollUntil(t, "the reply", s.stderr, func() bool { return len(s.api.Sent()) >= 1 })
	// The turn is over when the typing reaction is gone.
	pollUntil(t, "the reaction to be removed", s.stderr, func() bool {
		rs := s.api.Reactions()
		return len(rs) == 1 && rs[0].Removed
	})
	sent := s.api.Sent()
	if len(sent) != 1 {
		t.Fatalf("%d messages sent; want exactly one: %+v", len(sent), sent)
	}
	got := sent[0]
	if got.Kind != "reply" || got.ReplyTo != "om_q" || !got.ReplyInThread || got.MsgType != "interactive" || got.UUID == "" {
		t.Errorf("reply %+v; want a threaded card reply to om_q", got)
	}
	if got.Text != "echo: what is Parley?" {
		t.Errorf("reply text %q", got.Text)
	}
	if rs := s.api.Reactions(); rs[0].MessageID != "om_q" {
		t.Errorf("reaction on %s", rs[0].MessageID)
	}
	reqs := s.model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model saw %d requests; want 1 (only the mention)", len(reqs))
	}
	last := reqs[0].Messages[len(reqs[0].Messages)-1]
	if last.Content != "what is Parley?" {
		t.Errorf("model got %q", last.Content)
	}

	_, metrics := s.get(t, "/metrics")
	for _, want := range []string{
		`parley_messages_rejected_total{channel="feishu",reason="bad_signature"} 1`,
		`parley_messages_deduplicated_total{channel="feishu"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code, body := s.get(t, "/readyz"); code != 200 {
		t.Errorf("/readyz in webhook mode = %d %s", code, body)
	}
	if code := s.stop(); code != 0 {
		t.Fatalf("serve exited %d; stderr:\n%s", code, s.stderr.String())
	}
}

func TestFeishuFollowUpInTheAnsweredThread(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	s := startFeishuServe(t, nil)
	if code := s.post(t, groupEvent("om_root", "ou_alice", "remember 7", true)); code != 200 {
		t.Fatal(code)
	}
	pollUntil(t, "the first reply", s.stderr, func() bool { return len(s.api.Sent()) == 1 })
	follow := feishutest.Event(feishutest.Message{Token: e2eFeishuToken, MessageID: "om_follow", RootID: "om_root", ParentID: "om_root", ThreadID: "omt_1",
		ChatID: "oc_team", ChatType: "group", Sender: "ou_bob", Content: feishutest.Text("and what number?")})
	if code := s.post(t, follow); code != 200 {
		t.Fatal(code)
	}
	pollUntil(t, "the follow-up reply", s.stderr, func() bool { return len(s.api.Sent()) == 2 })
	reqs := s.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model saw %d requests", len(reqs))
	}
	var roles []string
	for _, m := range reqs[1].Messages[1:] {
		roles = append(roles, m.Role+":"+m.Content)
	}
	if got := strings.Join(roles, " | "); got != "user:remember 7 | assistant:echo: remember 7 | user:and what number?" {
		t.Fatalf("the follow-up is not in the thread's conversation: %s", got)
	}
	if sent := s.api.Sent(); sent[1].ReplyTo != "om_follow" || !sent[1].ReplyInThread {
		t.Errorf("follow-up reply %+v", sent[1])
	}
}

func TestFeishuLongConnectionServeAndReadiness(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	s := startFeishuServe(t, map[string]string{"FEISHU_MODE": ""})
	pollUntil(t, "/readyz with the long connection up", s.stderr, func() bool {
		code, _ := s.get(t, "/readyz")
		return code == 200
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ev := feishutest.Event(feishutest.Message{MessageID: "om_dm", ChatID: "oc_dm", ChatType: "p2p", Sender: "ou_alice", Content: feishutest.Text("hi over ws")})
	if code, err := s.api.Push(ctx, ev, 1); err != nil || code != 200 {
		t.Fatalf("push: %d %v", code, err)
	}
	pollUntil(t, "the DM reply", s.stderr, func() bool { return len(s.api.Sent()) == 1 })
	if got := s.api.Sent()[0]; got.Kind != "create" || got.ChatID != "oc_dm" || got.Text != "echo: hi over ws" {
		t.Errorf("DM reply %+v", got)
	}
	// The connection is lost and the first attempt to reopen it fails:
	// /readyz says so until the next attempt succeeds.
	s.api.Fail("endpoint", feishutest.Failure{Code: 1, Msg: "system busy"})
	s.api.DropConnections()
	pollUntil(t, "/readyz to report the lost connection", s.stderr, func() bool {
		code, body := s.get(t, "/readyz")
		return code == 503 && strings.Contains(body, "feishu")
	})
	_, metrics := s.get(t, "/metrics")
	if !strings.Contains(metrics, `parley_channel_connected{channel="feishu"} 0`) {
		t.Errorf("/metrics does not show the connection down")
	}
	pollUntil(t, "the reconnect", s.stderr, func() bool {
		code, _ := s.get(t, "/readyz")
		return code == 200
	})
	if code := s.stop(); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
}
