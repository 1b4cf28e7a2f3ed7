package agent

import (
	"context"
	"encoding/json"
	"github.com/parleyhq/parley/sessions"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/metrics"
	openai "github.com/sashabaranov/go-openai"
)

// funcTool is a Tool made of a name, a write flag and a function.
type funcTool struct {
	name   string
	writes bool
	params json.RawMessage
	fn     func(ctx context.Context, tc *TurnContext, args json.RawMessage) (Result, error)
}

func (f funcTool) Name() string                { return f.name }
func (f funcTool) Description() string         { return "test tool " + f.name }
func (f funcTool) Parameters() json.RawMessage { return f.params }
func (f funcTool) Writes() bool                { return f.writes }
func (f funcTool) Call(ctx context.Context, tc *TurnContext, args json.RawMessage) (Result, error) {
	return f.fn(ctx, tc, args)
}

// downTool is a tool that reports itself unavailable.
type downTool struct{ funcTool }

func (downTool) Available() bool { return false }

// textTool returns a read-only tool answering content.
func textTool(name, content string) funcTool {
	return funcTool{name: name, fn: func(context.Context, *TurnContext, json.RawMessage) (Result, error) {
		return Result{Content: content}, nil
	}}
}

// harness is an Agent wired to a fake model, with its metrics and the
// backoffs it chose.
type harness struct {
	srv    *openaitest.Server
	agent  *Agent
	m      *metrics.Metrics
	mu     sync.Mutex
	sleeps []time.Duration
}

func (h *harness) waits() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.sleeps...)
}

// newHarness starts a fake model and an Agent using it. cfg's zero fields
// get test-friendly values: the file's default retries, tiny backoffs and a
// Sleep that records instead of waiting.
func newHarness(t testing.TB, cfg Config, tools []Tool, opts ...openaitest.Option) *harness {
	t.Helper()
	return newHarnessMetrics(t, cfg, metrics.New(), tools, opts...)
}

// newHarnessMetrics is newHarness counting into m, which tools built
// before the harness may share.
func newHarnessMetrics(t testing.TB, cfg Config, m *metrics.Metrics, tools []Tool, opts ...openaitest.Option) *harness {
	t.Helper()
	h := &harness{srv: openaitest.New(t, opts...), m: m}
	reg := NewRegistry()
	for _, tool := range tools {
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	if cfg.Model == "" {
		cfg.Model = "test-model"
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = DefaultModelSection().MaxRetries // as the file's default
	}
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase = time.Millisecond
	}
	if cfg.BackoffMax == 0 {
		cfg.BackoffMax = 4 * time.Millisecond
	}
	if cfg.Sleep == nil {
		cfg.Sleep = func(ctx context.Context, d time.Duration) error {
			h.mu.Lock()
			h.sleeps = append(h.sleeps, d)
			h.mu.Unlock()
			return ctx.Err()
		}
	}
	client := NewClient(h.srv.URL(), "sk-test-secret", nil)
	h.agent = New(cfg, client, reg, h.m, slog.New(slog.DiscardHandler))
	return h
}

func (h *harness) run(t testing.TB, req TurnRequest) TurnResult {
	t.Helper()
	if req.Channel == "" {
		req.Channel = "console"
	}
	res, err := h.agent.Run(context.Background(), req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// metricValue returns the value of the counter name with exactly labels,
// or 0 when no such series exists. It reads the registry the way Prometheus
// would scrape it (prometheus/testutil is not in go.sum).
func metricValue(t testing.TB, m *metrics.Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			if len(s.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range s.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue series
				}
			}
			if c := s.GetCounter(); c != nil {
				return c.GetValue()
			}
			return float64(s.GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// wireMsg is the part of a request message the tests compare.
type wireMsg struct {
	Role, Content, ToolCallID string
	Calls                     []wireCall
}

type wireCall struct{ ID, Type, Name, Args string }

func simplify(msgs []openai.ChatCompletionMessage) []wireMsg {
	out := make([]wireMsg, len(msgs))
	for i, m := range msgs {
		out[i] = wireMsg{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			out[i].Calls = append(out[i].Calls, wireCall{c.ID, string(c.Type), c.Function.Name, c.Function.Arguments})
		}
	}
	return out
}

func toolNames(req openai.ChatCompletionRequest) []string {
	var out []string
	for _, t := range req.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

// stored encodes msgs as the store keeps a history.
func stored(t testing.TB, msgs ...sessions.Message) sessions.History {
	t.Helper()
	h, err := sessions.HistoryOf(msgs)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
