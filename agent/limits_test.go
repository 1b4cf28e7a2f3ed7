package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/metrics"
	openai "github.com/sashabaranov/go-openai"
)

// countingTool is a read-only tool that counts its runs.
func countingTool(name string, runs *atomic.Int32) funcTool {
	return funcTool{name: name, fn: func(context.Context, *TurnContext, json.RawMessage) (Result, error) {
		runs.Add(1)
		return Result{Content: "looked up"}, nil
	}}
}

// toolResults are the unwrapped tool results of a request, in order.
func toolResults(t *testing.T, req openai.ChatCompletionRequest) []string {
	t.Helper()
	var out []string
	for _, m := range req.Messages {
		if m.Role != openai.ChatMessageRoleTool {
			continue
		}
		_, content, ok := UnwrapToolResult(m.Content)
		if !ok {
			t.Fatalf("tool result not wrapped: %q", m.Content)
		}
		out = append(out, content)
	}
	return out
}

func calls(name string, n int) []openaitest.ToolCall {
	out := make([]openaitest.ToolCall, n)
	for i := range out {
		out[i] = openaitest.Call(name, fmt.Sprintf(`{"q":%d}`, i))
	}
	return out
}

// TestToolCallsCappedPerAnswer: a model answering with more tool calls
// than one answer may run gets the rest answered with an error result that
// says why, not run, and counted as capped.
func TestToolCallsCappedPerAnswer(t *testing.T) {
	var runs atomic.Int32
	h := newHarness(t, Config{MaxToolCallsPerAnswer: 2}, []Tool{countingTool("lookup", &runs)})
	h.srv.Script(openaitest.Tools(calls("lookup", 5)...), openaitest.Text("done"))
	res := h.run(t, TurnRequest{Channel: "slack", UserText: "look up everything"})
	if res.Reply != "done" {
		t.Fatalf("reply = %q", res.Reply)
	}
	if got := runs.Load(); got != 2 {
		t.Errorf("the tool ran %d times, want 2 (the cap per answer)", got)
	}
	results := toolResults(t, h.srv.Requests()[1])
	if len(results) != 5 {
		t.Fatalf("results = %d, want one per call (5)", len(results))
	}
	for i, r := range results {
		capped := strings.Contains(r, "one answer may call at most 2 tools")
		if capped != (i >= 2) {
			t.Errorf("result %d = %q; capped = %t, want %t", i, r, capped, i >= 2)
		}
	}
	if got := metricValue(t, h.m, "parley_tool_calls_total", map[string]string{"channel": "slack", "tool": "lookup", "outcome": metrics.OutcomeCapped}); got != 3 {
		t.Errorf("capped calls counted = %v, want 3", got)
	}
}

// TestToolCallsCappedPerTurn: once a turn's tool calls are spent, the
// calls past the cap are not run, and the next request offers no tools,
// so the model has to answer.
func TestToolCallsCappedPerTurn(t *testing.T) {
	var runs atomic.Int32
	h := newHarness(t, Config{MaxToolCallsPerAnswer: 3, MaxToolCallsPerTurn: 4, MaxToolIterations: 10}, []Tool{countingTool("lookup", &runs)})
	h.srv.Script(openaitest.Tools(calls("lookup", 3)...), openaitest.Tools(calls("lookup", 3)...), openaitest.Text("enough"))
	res := h.run(t, TurnRequest{UserText: "dig"})
	if res.Reply != "enough" {
		t.Fatalf("reply = %q", res.Reply)
	}
	if got := runs.Load(); got != 4 {
		t.Errorf("the tool ran %d times, want 4 (the cap per turn)", got)
	}
	reqs := h.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("requests = %d, want 3", len(reqs))
	}
	results := toolResults(t, reqs[2])[3:] // the second answer's
	for i, r := range results {
		capped := strings.Contains(r, "this turn may call at most 4 tools")
		if capped != (i >= 1) {
			t.Errorf("result %d of the second answer = %q; capped = %t, want %t", i, r, capped, i >= 1)
		}
	}
	if offered := toolNames(reqs[2]); len(offered) != 0 {
		t.Errorf("the request after the turn's calls were spent offered %v, want no tools", offered)
	}
}

// TestModelResponseBodyLimited: a model server that sends an endless body
// is cut off at maxResponseBytes (not read until a timeout, nor on to the
// wire cap of a stream when it answers a streaming request whole), and the
// request is not retried. How much was read is counted in bytes, not
// timed, and the deadlines are far off, so a loaded machine's slow reads
// (the race detector watches every byte) cannot turn the cut into a
// timeout that is retried.
func TestModelResponseBodyLimited(t *testing.T) {
	var requests atomic.Int32
	var written atomic.Int64
	finished := make(chan struct{}, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { finished <- struct{}{} }()
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"x","choices":[{"message":{"role":"assistant","content":"`))
		chunk := []byte(strings.Repeat("A", 64<<10))
		for {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return // the client hung up
			}
		}
	}))
	defer srv.Close()
	// The server's writes stop once the client hangs up and the socket
	// buffers between them are full: a few MiB on loopback. Far less than
	// a stream's wire cap, which is what a cut at maxResponseBytes proves.
	const slack = 16 << 20
	cutAt := func(what string) {
		t.Helper()
		srv.CloseClientConnections() // the server's write fails now, if it had not
		<-finished
		if n := written.Swap(0); n > maxResponseBytes+slack {
			t.Errorf("%s: the server wrote %d MiB before the client hung up; want at most %d MiB (the cap of an answer, %d MiB, plus socket buffers)",
				what, n>>20, (maxResponseBytes+slack)>>20, maxResponseBytes>>20)
		}
	}

	client := NewClient(srv.URL, "sk-test", nil)
	_, _, err := client.send(context.Background(), []byte(`{}`))
	if !errors.Is(err, errResponseTooLarge) {
		t.Fatalf("send = %v, want errResponseTooLarge", err)
	}
	cutAt("asked for whole")

	requests.Store(0)
	a := New(Config{Model: "m", MaxRetries: 3, Timeout: time.Hour, StreamIdleTimeout: time.Hour, TurnTimeout: time.Hour}, client, nil, nil, nil)
	res, err := a.Run(context.Background(), TurnRequest{UserText: "hi"})
	if err != nil || !res.Failed {
		t.Fatalf("Run = %+v, %v; want a failed turn (apology)", res, err)
	}
	if got := requests.Load(); got != 1 {
		t.Errorf("requests = %d, want 1: an oversized answer is not asked for again", got)
	}
	cutAt("a streaming request answered whole")
}

// TestMaxTokensDefault: every request carries max_completion_tokens, the
// default when the config leaves it zero.
func TestMaxTokensDefault(t *testing.T) {
	for _, tt := range []struct {
		set, want int
	}{{0, DefaultModelSection().MaxTokens}, {500, 500}} {
		h := newHarness(t, Config{MaxTokens: tt.set}, nil)
		h.run(t, TurnRequest{UserText: "hi"})
		if got := h.srv.Requests()[0].MaxCompletionTokens; got != tt.want {
			t.Errorf("MaxTokens %d: max_completion_tokens = %d, want %d", tt.set, got, tt.want)
		}
	}
}
