package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/internal/redistest"
	openai "github.com/sashabaranov/go-openai"
)

// eventually polls cond until it holds or 30 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// chatProcess is a `parley chat -m` process running in the background.
type chatProcess struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan error
}

func startChat(t *testing.T, bin string, env []string, args ...string) *chatProcess {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	p := &chatProcess{cmd: exec.CommandContext(ctx, bin, append([]string{"chat"}, args...)...), done: make(chan error, 1)}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	return p
}

// wait returns the process's stdout once it exited 0.
func (p *chatProcess) wait(t *testing.T) string {
	t.Helper()
	if err := <-p.done; err != nil {
		t.Fatalf("%v: %v\nstdout: %s\nstderr: %s", p.cmd.Args, err, p.stdout.String(), p.stderr.String())
	}
	return p.stdout.String()
}

// TestTwoChatProcessesOnOneConversation: while one process holds the
// conversation, a second process's message is answered by the first (it
// serves the queue in order), and the second prints that answer instead
// of waiting for ever; a process killed mid-turn leaves nobody hanging.
func TestTwoChatProcessesOnOneConversation(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	bin := buildParley(t)
	r := redistest.New(t)
	release := make(chan struct{})
	var requests atomic.Int32
	model := openaitest.New(t, openaitest.WithResponder(func(req openai.ChatCompletionRequest) openaitest.Step {
		if requests.Add(1) == 1 {
			<-release // the first answer waits until the second process has queued its message
		}
		return openaitest.Echo(req)
	}))
	var once atomic.Bool
	free := func() {
		if once.CompareAndSwap(false, true) {
			close(release)
		}
	}
	t.Cleanup(free)
	cfg := writeConfig(t, fmt.Sprintf("redis:\n  prefix: %q\nsessions:\n  lock_ttl: 2s\n", r.Prefix))
	env := append(os.Environ(), "REDIS_URL="+r.URL, "OPENAI_BASE_URL="+model.URL(), "OPENAI_API_KEY=sk-test", "PARLEY_HOME="+t.TempDir())
	inbox := r.Prefix + "conv:{console::X:}:inbox"

	first := startChat(t, bin, env, "--config", cfg, "--conversation", "X", "-m", "one")
	eventually(t, "the first request", func() bool { return requests.Load() == 1 })
	second := startChat(t, bin, env, "--config", cfg, "--conversation", "X", "-m", "two")
	eventually(t, "the second message queued", func() bool {
		n, _ := r.Client.LLen(context.Background(), inbox).Result()
		return n == 2
	})
	free()
	if out := first.wait(t); out != "echo: one\n" {
		t.Errorf("first process printed %q", out)
	}
	if out := second.wait(t); out != "echo: two\n" {
		t.Errorf("second process printed %q", out)
	}

	// Killed mid-turn: the next process answers the orphaned message
	// first (into the mailbox nobody reads) and then its own.
	model.Script(openaitest.Delay(time.Hour))
	before := model.RequestCount()
	killed := startChat(t, bin, env, "--config", cfg, "--conversation", "X", "-m", "three")
	eventually(t, "the killed process's request", func() bool { return model.RequestCount() == before+1 })
	if err := killed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-killed.done
	if out := startChat(t, bin, env, "--config", cfg, "--conversation", "X", "-m", "four").wait(t); out != "echo: four\n" {
		t.Errorf("the process after the killed one printed %q", out)
	}
	hist, err := r.Client.LRange(context.Background(), r.Prefix+"conv:{console::X:}:history", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var contents []string
	for _, h := range hist {
		contents = append(contents, h)
	}
	joined := strings.Join(contents, "\n")
	for _, want := range []string{"echo: one", "echo: two", "echo: three", "echo: four"} {
		if !strings.Contains(joined, want) {
			t.Errorf("history lacks %q:\n%s", want, joined)
		}
	}
}

// TestChatFailedTurnExitsNonZero: `chat -m` prints no answer, exits 1 and
// says why when the message was not answered, in words that tell a bad
// configuration from a model that is down.
func TestChatFailedTurnExitsNonZero(t *testing.T) {
	tests := []struct {
		name   string
		file   string
		key    string
		script []openaitest.Step
		want   string
	}{
		{"bad key", "", "sk-wrong", nil, "misconfigured"},
		{"unknown model", "", "sk-test", []openaitest.Step{openaitest.Error(404)}, "misconfigured"},
		{"server errors", "model:\n  max_retries: 1\n", "sk-test", []openaitest.Step{openaitest.Error(500), openaitest.Error(503)}, "not answering"},
		{"rate limited", "model:\n  max_retries: 1\n", "sk-test", []openaitest.Step{openaitest.Error(429), openaitest.Error(429)}, "not answering"},
		{"stalled past the turn deadline", "model:\n  turn_timeout: 200ms\n", "sk-test", []openaitest.Step{openaitest.Delay(time.Hour)}, "not answering"},
		{"refused by the policy", "policies:\n  platforms:\n    console:\n      access:\n        users: [someone-else]\n", "sk-test", nil, "not available to you"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := openaitest.New(t, openaitest.WithAPIKey("sk-test"))
			model.Script(tt.script...)
			var stdout, stderr bytes.Buffer
			getenv := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": tt.key, "PARLEY_HOME": t.TempDir(), "USER": "tester"})
			code := run(context.Background(), []string{"chat", "--config", writeConfig(t, tt.file), "-m", "hello"}, strings.NewReader(""), &stdout, &stderr, getenv)
			if code != 1 || stdout.Len() != 0 {
				t.Fatalf("exit %d, stdout %q; want 1 and no answer\nstderr: %s", code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stderr.String(), "not answered") || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr does not say why (%q):\n%s", tt.want, stderr.String())
			}
			if strings.Contains(stderr.String(), "sk-wrong") {
				t.Error("the key was printed")
			}
		})
	}
}

// TestChatCtrlCCancelsTheTurn: an interrupted `chat -m` stops its running
// turn at once and says so, instead of draining it for the shutdown
// timeout.
func TestChatCtrlCCancelsTheTurn(t *testing.T) {
	model := openaitest.New(t)
	model.Script(openaitest.Delay(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	getenv := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir()})
	cfg := writeConfig(t, "gateway:\n  shutdown_timeout: 1h\nmodel:\n  timeout: 1h\n  turn_timeout: 1h\n")
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"chat", "--config", cfg, "-m", "think hard"}, strings.NewReader(""), &stdout, &stderr, getenv)
	}()
	eventually(t, "the model request", func() bool { return model.RequestCount() == 1 })
	cancel() // what SIGINT does to the command's context
	select {
	case code := <-done:
		if code != 1 || !strings.Contains(stderr.String(), "cancelled") {
			t.Fatalf("exit %d, stderr %q; want 1 and the cancellation said", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("chat kept waiting for the turn after Ctrl-C")
	}
}

// TestChatMessageFlags: -m with nothing to send is a usage error, not an
// interactive session; --print-conversation puts the id first.
func TestChatMessageFlags(t *testing.T) {
	model := openaitest.New(t)
	getenv := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir()})
	for _, m := range []string{"", "   "} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"chat", "-m", m}, strings.NewReader("hello\n"), &stdout, &stderr, getenv)
		if code != 2 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "-m needs a message") {
			t.Errorf("chat -m %q: exit %d, stdout %q, stderr %q; want a usage error", m, code, stdout.String(), stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"chat", "--print-conversation", "--conversation", "abc", "-m", "hi"}, strings.NewReader(""), &stdout, &stderr, getenv)
	if code != 0 || stdout.String() != "abc\necho: hi\n" {
		t.Fatalf("exit %d, stdout %q; want the id, then the answer", code, stdout.String())
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"chat", "--print-conversation", "-m", "hi"}, strings.NewReader(""), &stdout, &stderr, getenv); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if lines := strings.Split(strings.TrimSpace(stdout.String()), "\n"); len(lines) != 2 || len(lines[0]) != 12 || lines[1] != "echo: hi" {
		t.Fatalf("stdout %q; want a fresh id, then the answer", stdout.String())
	}
}

// TestChatREPLLongLinesAndBanner: a line over 1 MiB is refused and the
// session goes on; without Redis the banner does not offer to continue
// the conversation later.
func TestChatREPLLongLinesAndBanner(t *testing.T) {
	model := openaitest.New(t)
	var stdout, stderr bytes.Buffer
	getenv := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir()})
	in := strings.Repeat("x", 1<<20+1) + "\nafter\n"
	if code := run(context.Background(), []string{"chat"}, strings.NewReader(in), &stdout, &stderr, getenv); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "longer than 1 MiB") || !strings.Contains(out, "echo: after") {
		t.Errorf("REPL output:\n%.500s", out)
	}
	if n := model.RequestCount(); n != 1 {
		t.Errorf("model saw %d requests; want only the short line", n)
	}
	banner, _, _ := strings.Cut(out, "\n")
	if strings.Contains(banner, "--conversation") || !strings.Contains(banner, "this process only") {
		t.Errorf("banner without Redis = %q", banner)
	}
}
