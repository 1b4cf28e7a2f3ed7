package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
	openai "github.com/sashabaranov/go-openai"
)

// BenchmarkTurn measures one turn with one tool call against the fake
// server: two model requests over loopback HTTP, one tool, the envelope.
func BenchmarkTurn(b *testing.B) {
	// The model calls the tool until it sees a result, then answers.
	responder := func(req openai.ChatCompletionRequest) openaitest.Step {
		if last := req.Messages[len(req.Messages)-1]; last.Role == openai.ChatMessageRoleTool {
			return openaitest.Text("it is noon")
		}
		return openaitest.Tools(openaitest.Call("clock", `{"tz":"UTC"}`))
	}
	srv := openaitest.New(b, openaitest.WithResponder(responder))
	reg := NewRegistry()
	if err := reg.Register(funcTool{name: "clock", fn: func(context.Context, *TurnContext, json.RawMessage) (Result, error) {
		return Result{Content: "12:00 UTC"}, nil
	}}); err != nil {
		b.Fatal(err)
	}
	a := New(Config{Model: "bench"}, NewClient(srv.URL(), "k", nil), reg, metrics.New(), slog.New(slog.DiscardHandler))
	history := make([]sessions.Message, 0, 20)
	for range 10 {
		history = append(history,
			sessions.Message{Role: "user", Content: "an earlier question of ordinary length"},
			sessions.Message{Role: "assistant", Content: "an earlier answer of ordinary length, a little longer"})
	}
	req := TurnRequest{Channel: "console", History: stored(b, history...), UserText: "what time is it?"}
	ctx := context.Background()

	b.ReportAllocs()
	for b.Loop() {
		res, err := a.Run(ctx, req)
		if err != nil || res.Failed || res.Iterations != 1 {
			b.Fatalf("Run = %+v, %v", res, err)
		}
	}
}

// BenchmarkPlainTurn and BenchmarkStreamedTurn measure a turn without
// tools answered whole and streamed in 6 pieces, against servers that
// allocate nothing per request: the cost of reading a stream.
func BenchmarkPlainTurn(b *testing.B) {
	benchmarkAnswer(b, openaitest.Constant(b, benchAnswer).URL)
}

func BenchmarkStreamedTurn(b *testing.B) {
	benchmarkAnswer(b, openaitest.ConstantStream(b, benchAnswer, len(benchAnswer)/6+1).URL)
}

const benchAnswer = "Run the rollback job from the deploy dashboard, then watch the error rate."

func benchmarkAnswer(b *testing.B, url string) {
	a := New(Config{Model: "bench"}, NewClient(url, "k", nil), nil, metrics.New(), slog.New(slog.DiscardHandler))
	history := make([]sessions.Message, 0, 20)
	for range 10 {
		history = append(history,
			sessions.Message{Role: "user", Content: "an earlier question of ordinary length"},
			sessions.Message{Role: "assistant", Content: "an earlier answer of ordinary length, a little longer"})
	}
	req := TurnRequest{Channel: "console", History: stored(b, history...), UserText: "how do I roll back?", Events: func(Event) {}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res, err := a.Run(ctx, req); err != nil || res.Reply != benchAnswer {
			b.Fatalf("Run = %+v, %v", res, err)
		}
	}
}
