package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
)

// wechatServe is one in-process `parley serve`.
type wechatServe struct {
	base   string
	stderr *syncBuffer
	cancel context.CancelFunc
	done   chan int
}

// startServe runs `parley serve` with env (plus its own PARLEY_LISTEN)
// until the test ends.
func startWeChatServe(t *testing.T, env map[string]string, args ...string) *wechatServe {
	t.Helper()
	addr := freeAddr(t)
	e := map[string]string{"PARLEY_LISTEN": addr}
	for k, v := range env {
		e[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &wechatServe{base: "http://" + addr, stderr: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	go func() { s.done <- run(ctx, append([]string{"serve"}, args...), nil, io.Discard, s.stderr, mapEnv(e)) }()
	t.Cleanup(func() { s.stop(t) })
	waitFor(t, s.base+"/healthz", s.stderr)
	return s
}

// stop stops serve and waits for it; later calls (the test's cleanup
// after an explicit stop) do nothing.
func (s *wechatServe) stop(t *testing.T) {
	s.cancel()
	select {
	case code, ok := <-s.done:
		if !ok {
			return
		}
		if code != 0 {
			t.Errorf("serve exited %d:\n%s", code, s.stderr.String())
		}
		close(s.done)
	case <-time.After(30 * time.Second):
		t.Errorf("serve did not stop:\n%s", s.stderr.String())
	}
}

// eventually polls cond with a generous deadline.
func wechatEventually(t *testing.T, what string, cond func() bool, logs ...*syncBuffer) {
	t.Helper()
	if wechattest.WaitFor(30*time.Second, cond) {
		return
	}
	var all strings.Builder
	for i, l := range logs {
		fmt.Fprintf(&all, "--- replica %d ---\n%s\n", i+1, l.String())
	}
	t.Fatalf("timed out waiting for %s\n%s", what, all.String())
}

// wechatLogin runs `parley wechat login` against the fake iLink server.
func wechatLogin(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"wechat", "login"}, args...), strings.NewReader(""), &stdout, &stderr, mapEnv(env))
	if code != 0 {
		t.Fatalf("parley wechat login exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func wechatFinishedFrames(f *wechattest.WeCom, reqID string) (frames []wechattest.Frame, finishes int) {
	for _, fr := range f.Frames("aibot_respond_msg") {
		if fr.ReqID == reqID {
			frames = append(frames, fr)
			if fr.Stream().Finish {
				finishes++
			}
		}
	}
	return frames, finishes
}

// Done-when of the WeChat issue: with two replicas on one Redis, a
// personal-WeChat message and a WeCom group mention each get exactly one
// answer.
func TestWeChatTwoReplicasAnswerEachMessageExactlyOnce(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	r := redistest.New(t)
	model := openaitest.New(t)
	ilink := wechattest.NewILink(t)
	wecom := wechattest.NewWeCom(t, "aibot-e2e", "wecom-secret")
	cfg := writeConfig(t, fmt.Sprintf("redis:\n  prefix: %q\n", r.Prefix))
	env := map[string]string{
		"PARLEY_CONFIG": cfg, "REDIS_URL": r.URL, "OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test",
		"PARLEY_HOME": t.TempDir(), "WECHAT_ILINK_BASE_URL": ilink.URL(),
		"WECOM_BOT_ID": wecom.BotID, "WECOM_BOT_SECRET": wecom.Secret, "WECOM_WS_URL": wecom.URL(),
	}

	out := wechatLogin(t, env)
	if !strings.Contains(out, "https://liteapp.weixin.qq.com/q/fake-1") || !strings.Contains(out, "Redis") {
		t.Fatalf("login output:\n%s", out)
	}

	a := startWeChatServe(t, env)
	b := startWeChatServe(t, env)
	wechatEventually(t, "the WeCom subscription", wecom.Connected, a.stderr, b.stderr)
	wechatEventually(t, "an iLink poll", func() bool { return len(ilink.Polls()) > 0 }, a.stderr, b.stderr)

	ilink.Add(wechattest.Message{ID: 424242, From: "alice@im.wechat", Text: "hello from wechat", ContextToken: "ctx-alice-1"})
	if err := wecom.SendCallback(wechattest.Callback{ReqID: "req-e2e", MsgID: "msg-e2e", ChatType: "group", ChatID: "grp-e2e", User: "zhangsan", Text: "@Parley hi from wecom"}); err != nil {
		t.Fatal(err)
	}
	wechatEventually(t, "both answers", func() bool {
		_, fin := wechatFinishedFrames(wecom, "req-e2e")
		return fin > 0 && len(ilink.Sends()) > 0
	}, a.stderr, b.stderr)
	time.Sleep(time.Second) // room for a second (wrong) answer to show up

	sends := ilink.Sends()
	if len(sends) != 1 {
		t.Fatalf("iLink sends = %+v; want exactly one", sends)
	}
	if s := sends[0]; s.To != "alice@im.wechat" || s.Text != "echo: hello from wechat" || s.ContextToken != "ctx-alice-1" || s.ClientID == "" {
		t.Errorf("iLink answer = %+v", s)
	}
	frames, finishes := wechatFinishedFrames(wecom, "req-e2e")
	if finishes != 1 {
		t.Fatalf("%d finished streams on req-e2e, want 1", finishes)
	}
	if last := frames[len(frames)-1].Stream(); last.Content != "echo: hi from wecom" || !last.Finish {
		t.Errorf("WeCom answer = %+v", last)
	}
	if n := len(wecom.Frames("aibot_send_msg")); n != 0 {
		t.Errorf("%d aibot_send_msg frames; the answer should stream on the req_id", n)
	}
	if n := model.RequestCount(); n != 2 {
		t.Errorf("the model answered %d requests, want 2", n)
	}
	if ilink.MaxConcurrentPolls() != 1 {
		t.Errorf("%d iLink polls were open at once; one replica should poll", ilink.MaxConcurrentPolls())
	}
	if wecom.Subscribes() != 1 || wecom.MaxLive() != 1 {
		t.Errorf("WeCom subscriptions %d, max live %d; want one connection", wecom.Subscribes(), wecom.MaxLive())
	}

	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"wechat", "status"}, nil, &stdout, &stderr, mapEnv(env)); code != 0 {
		t.Fatalf("status exited %d: %s", code, stderr.String())
	}
	for _, want := range []string{ilink.BotID, "session:     active", "cursor:      saved", "context token: newest", "WeCom AI bot: aibot-e2e"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, stdout.String())
		}
	}
}

// The wechat platform's builtin policy keeps write tools from the model,
// seen through a running serve (in-memory store, login in the 0600 file);
// and errcode -14 turns /readyz degraded.
func TestWeChatPolicyDefaultAndExpiredSessionThroughServe(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	model := openaitest.New(t)
	ilink := wechattest.NewILink(t)
	home := t.TempDir()
	env := map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_HOME": home, "WECHAT_ILINK_BASE_URL": ilink.URL()}
	if out := wechatLogin(t, env); !strings.Contains(out, "mode 0600") {
		t.Fatalf("login without Redis should say where the file is:\n%s", out)
	}
	s := startWeChatServe(t, env)
	ilink.Add(wechattest.Message{ID: 1, From: "bob@im.wechat", Text: "what tools do you have?", ContextToken: "ctx-bob"})
	wechatEventually(t, "the answer", func() bool { return len(ilink.Sends()) == 1 }, s.stderr)

	reqs := model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model saw %d requests", len(reqs))
	}
	var tools []string
	for _, tool := range reqs[0].Tools {
		if tool.Function != nil {
			tools = append(tools, tool.Function.Name)
		}
	}
	list := strings.Join(tools, ",")
	if !strings.Contains(list, "load_skill") || strings.Contains(list, "save_skill_reference") {
		t.Fatalf("tools offered on wechat = %v; want load_skill without save_skill_reference", tools)
	}
	// The console, same binary and model, does offer the write tool: the
	// difference is the wechat default, not a missing tool.
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"chat", "-m", "hi"}, strings.NewReader(""), &stdout, &stderr, mapEnv(env)); code != 0 {
		t.Fatalf("chat: %s", stderr.String())
	}
	all := model.Requests()
	var consoleTools []string
	for _, tool := range all[len(all)-1].Tools {
		if tool.Function != nil {
			consoleTools = append(consoleTools, tool.Function.Name)
		}
	}
	if !strings.Contains(strings.Join(consoleTools, ","), "save_skill_reference") {
		t.Fatalf("console tools = %v; expected the write tool there", consoleTools)
	}

	// errcode -14: polling pauses and /readyz says to log in again.
	ilink.Expire()
	wechatEventually(t, "/readyz to degrade", func() bool {
		resp, err := http.Get(s.base + "/readyz")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), "parley wechat login")
	}, s.stderr)
	if !strings.Contains(s.stderr.String(), "log in again") {
		t.Errorf("no log line telling the operator to log in again:\n%s", s.stderr.String())
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"wechat", "status"}, nil, &stdout, &stderr, mapEnv(env)); code != 0 || !strings.Contains(stdout.String(), "EXPIRED") {
		t.Fatalf("status after -14 (exit %d):\n%s", code, stdout.String())
	}
}
