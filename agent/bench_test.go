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
