package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/retry"
	openai "github.com/sashabaranov/go-openai"
)

// syncBuffer is a log sink safe for the servers' goroutines.
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

// fixture is a Manager with its registry, a debug log and the states it
// reported.
type fixture struct {
	m   *Manager
	reg *agent.Registry
	log *syncBuffer

	mu     sync.Mutex
	states []ServerState
}

// newFixture builds a Manager for cfg with test timing (short backoffs)
// and closes it at the end of the test. opts' Registry, Log and
// OnStateChange are filled in. It does not start the Manager.
func newFixture(t testing.TB, cfg Config, opts Options) *fixture {
	t.Helper()
	f := &fixture{reg: agent.NewRegistry(), log: &syncBuffer{}}
	opts.Registry = f.reg
	opts.Log = slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.OnStateChange = func(s ServerState) {
		f.mu.Lock()
		f.states = append(f.states, s)
		f.mu.Unlock()
	}
	m, err := New(cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	m.timing.backoff = retry.Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	f.m = m
	t.Cleanup(func() {
		m.Close()
		if t.Failed() {
			t.Logf("manager log:\n%s", f.log.String())
		}
	})
	return f
}

// start starts the Manager and waits for every server's first attempt.
func (f *fixture) start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.m.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
}

// state returns the named server's state.
func (f *fixture) state(t *testing.T, name string) ServerState {
	t.Helper()
	for _, s := range f.m.Servers() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no server %q", name)
	return ServerState{}
}

// names lists the registered tools.
func (f *fixture) names() []string {
	var out []string
	for _, t := range f.reg.All() {
		out = append(out, t.Name())
	}
	return out
}

// available reports whether the tool is registered and can run.
func (f *fixture) available(name string) bool {
	t, ok := f.reg.Get(name)
	if !ok {
		return false
	}
	a, ok := t.(agent.Availability)
	return !ok || a.Available()
}

// call calls a registered tool the way the agent does.
func (f *fixture) call(t *testing.T, ctx context.Context, name, arguments string) (string, error) {
	t.Helper()
	tool, ok := f.reg.Get(name)
	if !ok {
		t.Fatalf("tool %s is not registered; have %v", name, f.names())
	}
	res, err := tool.Call(ctx, &agent.TurnContext{Channel: "slack", Conversation: "c1", User: "U1"}, json.RawMessage(arguments))
	return res.Content, err
}

// killProcess kills pid outright, as a crash or the OOM killer would.
func killProcess(t testing.TB, pid int) {
	t.Helper()
	p, err := os.FindProcess(pid)
	if err == nil {
		err = p.Kill()
	}
	if err != nil {
		t.Fatalf("killing %d: %v", pid, err)
	}
}

// waitFor polls cond until it holds, failing the test after a minute.
// Tests never sleep to synchronise; they wait for what they need.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// model is the fake chat completions server with an Agent on f's registry.
type model struct {
	srv   *openaitest.Server
	agent *agent.Agent
	m     *metrics.Metrics
}

func newModel(t testing.TB, f *fixture, opts ...openaitest.Option) *model {
	t.Helper()
	md := &model{srv: openaitest.New(t, opts...), m: metrics.New()}
	md.agent = agent.New(agent.Config{Model: "test-model", MaxRetries: -1}, agent.NewClient(md.srv.URL(), "sk-test", nil), f.reg, md.m, nil)
	return md
}

// run answers one user message on channel.
func (md *model) run(t testing.TB, ctx context.Context, channel, text string, allow func(string) bool) agent.TurnResult {
	t.Helper()
	res, err := md.agent.Run(ctx, agent.TurnRequest{Channel: channel, Conversation: "c1", UserText: text, Allow: allow})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// toolResults returns the unwrapped tool results of a turn by tool name,
// failing if one is not wrapped as untrusted data.
func toolResults(t testing.TB, res agent.TurnResult) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range res.Messages {
		if m.Role != openai.ChatMessageRoleTool {
			continue
		}
		name, content, ok := agent.UnwrapToolResult(m.Content)
		if !ok || name != m.Name {
			t.Fatalf("tool message %q is not wrapped as untrusted data", m.Content)
		}
		out[name] = content
	}
	return out
}

// turnCalling runs a Slack turn in which the model calls tool with args
// and then answers. It checks that the turn answered, that the result the
// model saw contains want and that the call was counted with outcome, and
// returns the result.
func (md *model) turnCalling(t testing.TB, tool, args, want, outcome string) string {
	t.Helper()
	before := toolCalls(t, md.m, "slack", tool, outcome)
	md.srv.Script(openaitest.Tools(openaitest.Call(tool, args)), openaitest.Text("answered"))
	res := md.run(t, context.Background(), "slack", "go", nil)
	if res.Reply != "answered" || res.Failed {
		t.Errorf("turn = %+v, want it answered", res)
	}
	got := toolResults(t, res)[tool]
	if !strings.Contains(got, want) {
		t.Errorf("%s result = %.300q, want it to contain %q", tool, got, want)
	}
	if n := toolCalls(t, md.m, "slack", tool, outcome) - before; n != 1 {
		t.Errorf("%s calls counted %s: %v, want 1", tool, outcome, n)
	}
	return got
}

// offeredTools lists the tool names of a chat completion request.
func offeredTools(req openai.ChatCompletionRequest) []string {
	var out []string
	for _, t := range req.Tools {
		out = append(out, t.Function.Name)
	}
	slices.Sort(out)
	return out
}

// toolCalls counts parley_tool_calls_total for one label set.
func toolCalls(t testing.TB, m *metrics.Metrics, channel, tool, outcome string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != "parley_tool_calls_total" {
			continue
		}
	series:
		for _, s := range fam.GetMetric() {
			want := map[string]string{"channel": channel, "tool": tool, "outcome": outcome}
			for _, l := range s.GetLabel() {
				if want[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			return s.GetCounter().GetValue()
		}
	}
	return 0
}
