package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/tracing"
	openai "github.com/sashabaranov/go-openai"
)

// TestATurnIsTracedFromReceiveToSend (issue 15, item 5): one trace per
// message, receive → queue and turn → lock, history, model (with its token
// counts), tool, commit, send; the turn joins the trace through the inbox
// item, as it would on another replica.
func TestATurnIsTracedFromReceiveToSend(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tracer := tracing.New(provider)

	r := redistest.New(t)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix})
	model := openaitest.New(t)
	model.Script(openaitest.Tools(openaitest.Call("clock", `{}`)).WithUsage(openai.Usage{PromptTokens: 30, CompletionTokens: 5}),
		openaitest.Text("noon").WithUsage(openai.Usage{PromptTokens: 40, CompletionTokens: 2}))
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tools := agent.NewRegistry()
	if err := tools.Register(clockTool{}); err != nil {
		t.Fatal(err)
	}
	a := agent.New(agent.Config{Model: "test", Timeout: 5 * time.Second, Tracer: tracer}, agent.NewClient(model.URL(), "sk", nil), tools, m, log)
	gw := gateway.New(gateway.Config{Tracer: tracer, Tools: tools}, store, a, m, log)
	ch := newRecorder("slack")
	gw.Register(ch)
	gw.Start()
	t.Cleanup(func() { gw.Shutdown(context.Background()) })

	if err := gw.Submit(context.Background(), msg("t", "E1", "what time is it?")); err != nil {
		t.Fatal(err)
	}
	ch.wait(t, 1)
	until(t, "the turn span to end", func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == "turn" {
				return true
			}
		}
		return false
	})

	spans := map[string]sdktrace.ReadOnlySpan{}
	counts := map[string]int{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
		counts[s.Name()]++
	}
	parentOf := map[string]string{
		"queue": "receive", "turn": "receive", "lock": "turn", "history": "turn",
		"model": "turn", "tool": "turn", "commit": "turn", "send": "turn",
	}
	trace := spans["receive"].SpanContext().TraceID()
	for name, parent := range parentOf {
		s, ok := spans[name]
		if !ok {
			t.Fatalf("no %q span; got %v", name, counts)
		}
		if s.SpanContext().TraceID() != trace {
			t.Errorf("%s is in another trace", name)
		}
		if s.Parent().SpanID() != spans[parent].SpanContext().SpanID() {
			t.Errorf("%s's parent is not %s", name, parent)
		}
	}
	if counts["model"] != 2 || counts["tool"] != 1 {
		t.Errorf("spans %v; want two model requests and one tool call", counts)
	}
	tokens := 0
	for _, s := range rec.Ended() {
		if s.Name() != "model" {
			continue
		}
		for _, kv := range s.Attributes() {
			if kv.Key == attribute.Key("gen_ai.usage.input_tokens") {
				tokens += int(kv.Value.AsInt64())
			}
		}
	}
	if tokens != 70 {
		t.Errorf("input tokens on the model spans add up to %d; want 30+40", tokens)
	}
	// The queue span starts when the message was accepted, before the turn.
	if q := spans["queue"]; !q.StartTime().Before(spans["turn"].StartTime()) && !q.StartTime().Equal(spans["turn"].StartTime()) {
		t.Errorf("queue span starts at %v, after the turn at %v", q.StartTime(), spans["turn"].StartTime())
	}
}

// clockTool is a read-only tool that tells the time.
type clockTool struct{}

func (clockTool) Name() string                { return "clock" }
func (clockTool) Description() string         { return "Tells the time." }
func (clockTool) Parameters() json.RawMessage { return nil }
func (clockTool) Writes() bool                { return false }
func (clockTool) Call(context.Context, *agent.TurnContext, json.RawMessage) (agent.Result, error) {
	return agent.Result{Content: "12:00"}, nil
}
