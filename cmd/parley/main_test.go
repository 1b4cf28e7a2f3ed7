package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/internal/parleybin"
	"github.com/parleyhq/parley/internal/redistest"
)

// buildParley returns the parley binary, built once for the whole run.
func buildParley(t *testing.T) string {
	t.Helper()
	return parleybin.Path(t)
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "parley.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHistorySurvivesAcrossChatProcesses(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	bin := buildParley(t)
	r := redistest.New(t)
	model := openaitest.New(t)
	cfg := writeConfig(t, fmt.Sprintf("redis:\n  prefix: %q\n", r.Prefix))
	env := append(os.Environ(), "REDIS_URL="+r.URL, "OPENAI_BASE_URL="+model.URL(), "OPENAI_API_KEY=sk-test", "PARLEY_HOME="+t.TempDir())
	chat := func(text string) string {
		t.Helper()
		cmd := exec.Command(bin, "chat", "--config", cfg, "-m", text, "--conversation", "X")
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("parley chat -m %q: %v\n%s", text, err, stderr.String())
		}
		return stdout.String()
	}
	if out := chat("my number is 42"); out != "echo: my number is 42\n" {
		t.Fatalf("first process printed %q; want only the reply", out)
	}
	if out := chat("what is my number?"); out != "echo: what is my number?\n" {
		t.Fatalf("second process printed %q", out)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model saw %d requests, want 2", len(reqs))
	}
	var roles []string
	for _, m := range reqs[1].Messages {
		roles = append(roles, m.Role+":"+m.Content)
	}
	got := strings.Join(roles[1:], " | ") // skip the system prompt
	want := "user:my number is 42 | assistant:echo: my number is 42 | user:what is my number?"
	if got != want {
		t.Fatalf("second process sent\n  %s\nwant\n  %s", got, want)
	}
}

func TestChatOneTurnOnTheInMemoryStore(t *testing.T) {
	model := openaitest.New(t)
	var stdout, stderr bytes.Buffer
	getenv := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir()})
	code := run(context.Background(), []string{"chat", "-m", "hello"}, strings.NewReader(""), &stdout, &stderr, getenv)
	if code != 0 || stdout.String() != "echo: hello\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// TestChatMessageWithoutRedisWarnsNothing: `parley chat -m` on the
// in-memory store prints the answer and no warning (one message is meant
// to be forgotten); the interactive console still warns.
func TestChatMessageWithoutRedisWarnsNothing(t *testing.T) {
	model := openaitest.New(t)
	getenv := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir()})
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"chat", "-m", "hello"}, strings.NewReader(""), &stdout, &stderr, getenv)
	if code != 0 || stdout.String() != "echo: hello\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	if strings.Contains(stderr.String(), "REDIS_URL") {
		t.Errorf("chat -m warned about the in-memory store: %q", stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), []string{"chat"}, strings.NewReader("/exit\n"), &stdout, &stderr, getenv); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "in-memory store") {
		t.Errorf("the interactive console did not warn about the in-memory store: %q", stderr.String())
	}
}

func TestChatREPL(t *testing.T) {
	model := openaitest.New(t)
	var stdout, stderr bytes.Buffer
	getenv := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir()})
	code := run(context.Background(), []string{"chat"}, strings.NewReader("one\n\ntwo\n/exit\nthree\n"), &stdout, &stderr, getenv)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "echo: one") || !strings.Contains(out, "echo: two") || strings.Contains(out, "echo: three") {
		t.Fatalf("REPL output:\n%s", out)
	}
}

func TestMissingAPIKeyIsOneLine(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"chat", "-m", "hi"}, strings.NewReader(""), &stdout, &stderr, mapEnv(map[string]string{"PARLEY_HOME": t.TempDir()}))
	if code == 0 {
		t.Fatal("chat without OPENAI_API_KEY succeeded")
	}
	if lines := strings.Count(strings.TrimSpace(stderr.String()), "\n"); lines != 0 || !strings.Contains(stderr.String(), "OPENAI_API_KEY") {
		t.Fatalf("stderr = %q; want one line naming OPENAI_API_KEY", stderr.String())
	}
}

func TestConfigCheck(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		env      map[string]string
		wantCode int
		want     []string
		notWant  []string
	}{
		{"valid, secrets masked", "model:\n  name: gpt-x\n", map[string]string{"OPENAI_API_KEY": "sk-secret-1", "SLACK_SIGNING_SECRET": "sig-secret-2", "SLACK_BOT_TOKEN": "xoxb-secret-3"}, 0,
			[]string{"name: gpt-x", "api_key: <secret>", "signing_secret: <secret>", "bot_token: <secret>"}, []string{"sk-secret-1", "sig-secret-2", "xoxb-secret-3"}},
		{"unknown key", "modle: {}\n", nil, 1, []string{"line 1", `unknown key "modle"`}, nil},
		{"bad value", "gateway:\n  workers: 0\n", nil, 1, []string{"gateway.workers"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"config", "check", "--config", writeConfig(t, tt.file)}, nil, &stdout, &stderr, mapEnv(tt.env))
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", code, tt.wantCode, stderr.String())
			}
			all := stdout.String() + stderr.String()
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q:\n%s", w, all)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(all, w) {
					t.Errorf("output shows %q:\n%s", w, all)
				}
			}
		})
	}
}

func TestServeHealthReadinessMetricsAndShutdown(t *testing.T) {
	model := openaitest.New(t)
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	getenv := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "PARLEY_LISTEN": addr, "PARLEY_HOME": t.TempDir()})
	var stderr syncBuffer
	go func() { done <- run(ctx, []string{"serve"}, nil, io.Discard, &stderr, getenv) }()
	base := "http://" + addr
	waitFor(t, base+"/healthz", &stderr)
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready", "/metrics": "parley_redis_up 1"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s = %d %q; want 200 containing %q", path, resp.StatusCode, body, want)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d after SIGTERM-equivalent", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
}

func TestReadyzFailsWhileRedisIsDown(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	r := redistest.New(t)
	// A server we can stop: a private redis-server is not guaranteed, so
	// point Parley at a listener that accepts and then vanishes.
	model := openaitest.New(t)
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	target, err := url.Parse(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newTCPProxy(t, target.Host)
	getenv := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "PARLEY_LISTEN": addr, "PARLEY_HOME": t.TempDir(),
		"REDIS_URL": "redis://" + proxy.addr()})
	var stderr syncBuffer
	go func() { done <- run(ctx, []string{"serve"}, nil, io.Discard, &stderr, getenv) }()
	base := "http://" + addr
	waitFor(t, base+"/readyz", &stderr)
	proxy.close()
	// A probe every few seconds for the whole outage: one log line.
	for range 4 {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("/readyz with Redis down = %d; want 503", resp.StatusCode)
		}
	}
	cancel()
	<-done
	if n := strings.Count(stderr.String(), "redis does not answer; this replica"); n != 1 {
		t.Errorf("the outage was logged %d times; want once:\n%s", n, stderr.String())
	}
	if n := strings.Count(stderr.String(), "level=WARN msg=\"redis client:"); n > 1 {
		t.Errorf("go-redis warned %d times; want its repeats at debug level:\n%s", n, stderr.String())
	}
}

func mapEnv(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// syncBuffer is a bytes.Buffer safe to write from the server goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func waitFor(t *testing.T, url string, stderr *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered 200 (last error %v); stderr:\n%s", url, err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestHealthcheckAndVersion(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			http.Error(w, "redis unreachable", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer ok.Close()
	addr := strings.TrimPrefix(ok.URL, "http://")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"healthcheck", "--addr", addr}, nil, &stdout, &stderr, mapEnv(nil)); code != 0 {
		t.Fatalf("healthcheck of a healthy server: exit %d, %s", code, stderr.String())
	}
	if code := run(context.Background(), []string{"healthcheck", "--ready"}, nil, &stdout, &stderr, mapEnv(map[string]string{"PARLEY_LISTEN": addr})); code == 0 {
		t.Fatal("healthcheck --ready passed although /readyz answers 503")
	}
	closed := freeAddr(t)
	if code := run(context.Background(), []string{"healthcheck", "--addr", closed}, nil, &stdout, &stderr, mapEnv(nil)); code == 0 {
		t.Fatal("healthcheck passed with nothing listening")
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"version"}, nil, &stdout, &stderr, mapEnv(nil)); code != 0 || stdout.String() != "parley dev\n" {
		t.Fatalf("version: %d %q", code, stdout.String())
	}
}

// freeAddr returns a loopback address nothing listens on, for a server the
// test starts next.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestChatTerminalUserAdministersTheConsole: the person at the terminal
// may run the console's admin commands without being named in admins.
func TestChatTerminalUserAdministersTheConsole(t *testing.T) {
	model := openaitest.New(t)
	getenv := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir(), "USER": "alice"})
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"chat", "-m", "/skill list"}, strings.NewReader(""), &stdout, &stderr, getenv)
	if code != 0 || strings.Contains(stdout.String(), "only an administrator") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want the skill list", code, stdout.String(), stderr.String())
	}
}

// TestChatConversationAcceptsTheShownID: --conversation takes the id the
// banner shows, the conversation as logs and the admin console show it,
// and its key with the trailing separator, all naming one conversation.
func TestChatConversationAcceptsTheShownID(t *testing.T) {
	model := openaitest.New(t)
	getenv := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir()})
	for _, named := range []string{"f0804e6bda20", "console::f0804e6bda20", "console::f0804e6bda20:"} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"chat", "--print-conversation", "--conversation", named, "-m", "hi"}, strings.NewReader(""), &stdout, &stderr, getenv)
		if code != 0 || !strings.HasPrefix(stdout.String(), "f0804e6bda20\n") {
			t.Errorf("--conversation %s: exit %d, stdout %q, stderr %q; want conversation f0804e6bda20", named, code, stdout.String(), stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"chat", "--conversation", "slack:T1:C1:", "-m", "hi"}, strings.NewReader(""), &stdout, &stderr, getenv); code != 2 {
		t.Errorf("--conversation of a Slack conversation: exit %d, want 2 (usage)", code)
	}
}
