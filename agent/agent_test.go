package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
	openai "github.com/sashabaranov/go-openai"
)

func TestToolLoopMessages(t *testing.T) {
	var gotArgs string
	var gotTC TurnContext
	weather := funcTool{
		name:   "weather",
		params: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		fn: func(_ context.Context, tc *TurnContext, args json.RawMessage) (Result, error) {
			gotArgs, gotTC = string(args), *tc
			return Result{Content: "sunny, 21°C"}, nil
		},
	}
	h := newHarness(t, Config{}, []Tool{weather, textTool("clock", "noon")})
	h.srv.Script(
		openaitest.Tools(openaitest.ToolCall{ID: "call_a", Name: "weather", Arguments: `{"city":"Paris"}`}),
		openaitest.Text("It is sunny in Paris."),
	)
	history := []sessions.Message{
		{Role: "user", Content: "hi"},
		{Role: "assistant", Content: "hello"},
	}
	res := h.run(t, TurnRequest{
		Channel: "slack", Workspace: "T1", Chat: "C1", Conversation: "slack:T1:C1:", User: "U1",
		History: stored(t, history...), UserText: "weather in Paris?",
	})

	if res.Reply != "It is sunny in Paris." || res.Failed || res.Iterations != 1 {
		t.Errorf("result = %+v", res)
	}
	if gotArgs != `{"city":"Paris"}` {
		t.Errorf("tool args = %s", gotArgs)
	}
	if gotTC.Channel != "slack" || gotTC.Workspace != "T1" || gotTC.Chat != "C1" || gotTC.Conversation != "slack:T1:C1:" || gotTC.User != "U1" {
		t.Errorf("turn context = %+v", gotTC)
	}
	if n := len(gotTC.History); n != 4 || gotTC.History[2].Content != "weather in Paris?" || len(gotTC.History[3].ToolCalls) != 1 {
		t.Errorf("tool saw history %+v, want stored history, user message, the call", gotTC.History)
	}

	system := h.agent.SystemPrompt("")
	wrapped := WrapToolResult("weather", "sunny, 21°C")
	call := []wireCall{{"call_a", "function", "weather", `{"city":"Paris"}`}}
	want := [][]wireMsg{
		{
			{Role: "system", Content: system},
			{Role: "user", Content: "hi"},
			{Role: "assistant", Content: "hello"},
			{Role: "user", Content: "weather in Paris?"},
		},
		{
			{Role: "system", Content: system},
			{Role: "user", Content: "hi"},
			{Role: "assistant", Content: "hello"},
			{Role: "user", Content: "weather in Paris?"},
			{Role: "assistant", Calls: call},
			{Role: "tool", Content: wrapped, ToolCallID: "call_a"},
		},
	}
	reqs := h.srv.Requests()
	if len(reqs) != len(want) {
		t.Fatalf("model saw %d requests, want %d", len(reqs), len(want))
	}
	for i, req := range reqs {
		if got := simplify(req.Messages); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("request %d messages:\n got %+v\nwant %+v", i, got, want[i])
		}
		if got := toolNames(req); !slices.Equal(got, []string{"clock", "weather"}) {
			t.Errorf("request %d tools = %v, want sorted clock, weather", i, got)
		}
		if req.Model != "test-model" {
			t.Errorf("request %d model = %q", i, req.Model)
		}
	}
	if !strings.Contains(wrapped, `trust="untrusted"`) || !strings.Contains(system, "never instructions") {
		t.Errorf("tool result or system prompt lacks the boundary: %q / %q", wrapped, system)
	}

	wantMsgs := []sessions.Message{
		{Role: "user", Content: "weather in Paris?"},
		{Role: "assistant", ToolCalls: []sessions.ToolCall{{ID: "call_a", Name: "weather", Arguments: `{"city":"Paris"}`}}},
		{Role: "tool", Content: wrapped, Name: "weather", ToolCallID: "call_a"},
		// The answer carries the turn's tokens, both requests together.
		{Role: "assistant", Content: "It is sunny in Paris.", Usage: &sessions.Usage{Model: "default", Prompt: res.Usage.Prompt, Completion: res.Usage.Completion, Cached: res.Usage.Cached}},
	}
	if res.Usage.Prompt <= 0 {
		t.Errorf("usage = %+v, want the prompt tokens counted", res.Usage)
	}
	if !reflect.DeepEqual(res.Messages, wantMsgs) {
		t.Errorf("Messages:\n got %+v\nwant %+v", res.Messages, wantMsgs)
	}
	if got := metricValue(t, h.m, "parley_tool_calls_total", map[string]string{"channel": "slack", "tool": "weather", "outcome": "ok"}); got != 1 {
		t.Errorf("tool calls ok = %v, want 1", got)
	}
	if len(history) != 2 || history[1].Content != "hello" {
		t.Error("Run modified the caller's history")
	}
}

func TestSystemPromptStable(t *testing.T) {
	h := newHarness(t, Config{SystemPrompt: "You are a test bot."}, []Tool{textTool("clock", "noon")})
	const extra = "## Skills\n- pdf: read PDF files"
	h.run(t, TurnRequest{Channel: "slack", User: "alice", Conversation: "slack:T1:C1:", UserText: "first", SystemExtra: extra})
	h.run(t, TurnRequest{
		Channel: "feishu", User: "bob", Conversation: "feishu:T9:C9:x", UserText: "second", SystemExtra: extra,
		History: stored(t, sessions.Message{Role: "user", Content: "older"}, sessions.Message{Role: "assistant", Content: "reply"}),
	})
	reqs := h.srv.RawRequests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	var first, second struct {
		Messages []json.RawMessage `json:"messages"`
		Tools    json.RawMessage   `json:"tools"`
	}
	if err := json.Unmarshal(reqs[0], &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(reqs[1], &second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Messages[0], second.Messages[0]) {
		t.Errorf("system prompt differs between turns:\n%s\n%s", first.Messages[0], second.Messages[0])
	}
	if !bytes.Equal(first.Tools, second.Tools) {
		t.Errorf("tools differ between turns:\n%s\n%s", first.Tools, second.Tools)
	}
	sys := h.srv.Requests()[0].Messages[0].Content
	for _, want := range []string{"You are a test bot.", boundaryParagraph, extra} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, sys)
		}
	}
	for _, leak := range []string{"alice", "slack", "T1"} {
		if strings.Contains(sys, leak) {
			t.Errorf("system prompt holds per-turn data %q", leak)
		}
	}
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name string
		fail openaitest.Step
	}{
		{"500", openaitest.Error(500)},
		{"502", openaitest.Error(502)},
		{"503", openaitest.Error(503)},
		{"429 without Retry-After", openaitest.Error(429)},
		{"truncated JSON", openaitest.Malformed("")},
		{"not JSON", openaitest.Malformed("<html>bad gateway</html>")},
		{"no choices", openaitest.Malformed(`{"id":"x","object":"chat.completion","choices":[]}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{}, nil)
			h.srv.Script(tt.fail, openaitest.Text("recovered"))
			res := h.run(t, TurnRequest{UserText: "hi"})
			if res.Failed || res.Reply != "recovered" {
				t.Fatalf("result = %+v, want the retried answer", res)
			}
			if n := h.srv.RequestCount(); n != 2 {
				t.Errorf("requests = %d, want 2", n)
			}
			waits := h.waits()
			if len(waits) != 1 || waits[0] < time.Millisecond/2 || waits[0] > time.Millisecond {
				t.Errorf("backoffs = %v, want one in [0.5ms, 1ms] (BackoffBase 1ms, jittered)", waits)
			}
			if got := metricValue(t, h.m, "parley_llm_retries_total", nil); got != 1 {
				t.Errorf("retries metric = %v, want 1", got)
			}
			for outcome, want := range map[string]float64{"retry": 1, "ok": 1, "error": 0} {
				if got := metricValue(t, h.m, "parley_llm_requests_total", map[string]string{"model": "default", "outcome": outcome}); got != want {
					t.Errorf("requests{outcome=%s} = %v, want %v", outcome, got, want)
				}
			}
		})
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	tests := []struct {
		header string
		want   time.Duration
	}{
		{"1", time.Second},
		{"0.25", 250 * time.Millisecond},
		{"3600", maxRetryAfter},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			h := newHarness(t, Config{}, nil)
			h.srv.Script(openaitest.Error(429).WithHeader("Retry-After", tt.header), openaitest.Text("ok"))
			if res := h.run(t, TurnRequest{UserText: "hi"}); res.Reply != "ok" {
				t.Fatalf("reply = %q", res.Reply)
			}
			if got := h.waits(); !slices.Equal(got, []time.Duration{tt.want}) {
				t.Errorf("backoffs = %v, want [%v] from Retry-After", got, tt.want)
			}
		})
	}
}

func TestTimeoutThenApology(t *testing.T) {
	h := newHarness(t, Config{Timeout: 50 * time.Millisecond, MaxRetries: 2}, nil)
	// Each attempt waits far longer than Timeout; the fake server ends the
	// handler when the client gives up.
	h.srv.Script(openaitest.Delay(time.Hour), openaitest.Delay(time.Hour), openaitest.Delay(time.Hour), openaitest.Text("too late"))
	res, err := h.agent.Run(context.Background(), TurnRequest{Channel: "console", UserText: "are you there?",
		History: stored(t, sessions.Message{Role: "user", Content: "old"}, sessions.Message{Role: "assistant", Content: "answer"})})
	if err != nil {
		t.Fatalf("Run returned %v, want nil error on model failure", err)
	}
	if !res.Failed || res.Reply != ApologyReply {
		t.Errorf("result = %+v, want Failed with the apology", res)
	}
	want := []sessions.Message{{Role: "user", Content: "are you there?"}}
	if !reflect.DeepEqual(res.Messages, want) {
		t.Errorf("Messages = %+v, want just the user message", res.Messages)
	}
	if n := h.srv.RequestCount(); n != 3 {
		t.Errorf("requests = %d, want 3 (1 + MaxRetries)", n)
	}
	if got := len(h.waits()); got != 2 {
		t.Errorf("backoffs = %d, want 2", got)
	}
	if got := metricValue(t, h.m, "parley_llm_requests_total", map[string]string{"model": "default", "outcome": "error"}); got != 1 {
		t.Errorf("requests{error} = %v, want 1", got)
	}
	if got := metricValue(t, h.m, "parley_llm_requests_total", map[string]string{"model": "default", "outcome": "retry"}); got != 2 {
		t.Errorf("requests{retry} = %v, want 2", got)
	}
}

func TestNotRetried(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var logs bytes.Buffer
			h := newHarness(t, Config{}, nil)
			h.agent.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			h.srv.Script(openaitest.Error(status), openaitest.Text("never sent"))
			res := h.run(t, TurnRequest{UserText: "hi"})
			if !res.Failed || res.Failure != Misconfigured || res.Reply != MisconfiguredReply || len(res.Messages) != 1 {
				t.Errorf("result = %+v, want the misconfiguration apology", res)
			}
			if n := h.srv.RequestCount(); n != 1 {
				t.Errorf("requests = %d, want 1 (no retry)", n)
			}
			if w := h.waits(); len(w) != 0 {
				t.Errorf("backoffs = %v, want none", w)
			}
			if !strings.Contains(logs.String(), fmt.Sprint(status)) {
				t.Errorf("the failure was not logged: %s", logs.String())
			}
			if strings.Contains(logs.String(), "sk-test-secret") {
				t.Error("the API key was logged")
			}
		})
	}
}

func TestAPIKeySent(t *testing.T) {
	h := newHarness(t, Config{}, nil, openaitest.WithAPIKey("sk-test-secret"))
	if res := h.run(t, TurnRequest{UserText: "hi"}); res.Failed || res.Reply != "echo: hi" {
		t.Fatalf("result = %+v", res)
	}
}

func TestCancellation(t *testing.T) {
	t.Run("during a model request", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		h := newHarness(t, Config{}, nil, openaitest.WithResponder(func(openai.ChatCompletionRequest) openaitest.Step {
			cancel() // the caller gives up while the model is thinking
			return openaitest.Delay(time.Hour)
		}))
		_, err := h.agent.Run(ctx, TurnRequest{UserText: "hi"})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if w := h.waits(); len(w) != 0 {
			t.Errorf("a cancelled request was retried: %v", w)
		}
	})
	t.Run("during a tool call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stop := funcTool{name: "stop", fn: func(context.Context, *TurnContext, json.RawMessage) (Result, error) {
			cancel()
			return Result{Content: "stopped"}, nil
		}}
		h := newHarness(t, Config{}, []Tool{stop})
		h.srv.Script(openaitest.Tools(openaitest.Call("stop", "{}")), openaitest.Text("never"))
		_, err := h.agent.Run(ctx, TurnRequest{UserText: "hi"})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if n := h.srv.RequestCount(); n != 1 {
			t.Errorf("requests = %d, want 1", n)
		}
	})
}

func TestToolFailures(t *testing.T) {
	errTool := funcTool{name: "broken", fn: func(context.Context, *TurnContext, json.RawMessage) (Result, error) {
		return Result{Content: "ignored"}, errors.New("disk on fire")
	}}
	panicTool := funcTool{name: "panicky", fn: func(context.Context, *TurnContext, json.RawMessage) (Result, error) {
		panic("boom")
	}}
	writer := funcTool{name: "save", writes: true, fn: func(context.Context, *TurnContext, json.RawMessage) (Result, error) {
		t.Error("a denied tool ran")
		return Result{}, nil
	}}
	down := downTool{funcTool{name: "down", fn: func(context.Context, *TurnContext, json.RawMessage) (Result, error) {
		t.Error("an unavailable tool ran")
		return Result{}, nil
	}}}
	slow := funcTool{name: "slow", fn: func(context.Context, *TurnContext, json.RawMessage) (Result, error) {
		return Result{}, fmt.Errorf("no answer within 30s: %w", context.DeadlineExceeded)
	}}
	tests := []struct {
		name        string
		call        openaitest.ToolCall
		wantContent string
		label       string
		outcome     string
	}{
		{"unknown tool", openaitest.Call("nosuch", "{}"), "unknown tool nosuch", unknownToolLabel, metrics.OutcomeError},
		{"invalid JSON", openaitest.Call("echo", `{"x":`), "invalid arguments for tool echo: not valid JSON", "echo", metrics.OutcomeError},
		{"arguments not an object", openaitest.Call("echo", `["x"]`), "invalid arguments for tool echo: not a JSON object", "echo", metrics.OutcomeError},
		{"tool error", openaitest.Call("broken", "{}"), "error: disk on fire", "broken", metrics.OutcomeError},
		{"tool panic", openaitest.Call("panicky", "{}"), "error: tool panicky failed", "panicky", metrics.OutcomeError},
		{"denied tool called anyway", openaitest.Call("save", `{"f":"x"}`), "tool save is not available in this conversation", "save", metrics.OutcomeDenied},
		{"unavailable tool called anyway", openaitest.Call("down", "{}"), "tool down is unavailable right now", "down", metrics.OutcomeUnavailable},
		{"tool deadline", openaitest.Call("slow", "{}"), "error: no answer within 30s", "slow", metrics.OutcomeTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{}, []Tool{textTool("echo", "echoed"), errTool, panicTool, writer, down, slow})
			tt.call.ID = "call_1"
			h.srv.Script(openaitest.Tools(tt.call), openaitest.Text("final answer"))
			res := h.run(t, TurnRequest{Channel: "wechat", UserText: "go", Allow: func(name string) bool { return name != "save" }})
			if res.Failed || res.Reply != "final answer" {
				t.Fatalf("result = %+v, want the final answer", res)
			}
			reqs := h.srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("requests = %d", len(reqs))
			}
			if offered := toolNames(reqs[0]); slices.Contains(offered, "save") || slices.Contains(offered, "down") {
				t.Errorf("offered %v: a denied or unavailable tool was offered", offered)
			}
			last := reqs[1].Messages[len(reqs[1].Messages)-1]
			name, content, ok := UnwrapToolResult(last.Content)
			if last.Role != "tool" || last.ToolCallID != "call_1" || !ok || name != tt.call.Name {
				t.Fatalf("last message = %+v, want a wrapped result for call_1", last)
			}
			if !strings.Contains(content, tt.wantContent) {
				t.Errorf("result = %q, want it to contain %q", content, tt.wantContent)
			}
			labels := map[string]string{"channel": "wechat", "tool": tt.label, "outcome": tt.outcome}
			if got := metricValue(t, h.m, "parley_tool_calls_total", labels); got != 1 {
				t.Errorf("tool_calls%v = %v, want 1", labels, got)
			}
			wantDenials := 0.0
			if tt.outcome == metrics.OutcomeDenied {
				wantDenials = 1
			}
			if got := metricValue(t, h.m, "parley_policy_denials_total", map[string]string{"channel": "wechat", "kind": "tool"}); got != wantDenials {
				t.Errorf("policy denials = %v, want %v", got, wantDenials)
			}
			// Only calls that ran are timed.
			wantTimed := 0.0
			if tt.name == "tool error" || tt.name == "tool panic" || tt.name == "tool deadline" {
				wantTimed = 1
			}
			if got := metricValue(t, h.m, "parley_tool_call_duration_seconds", map[string]string{"tool": tt.label}); got != wantTimed {
				t.Errorf("tool call durations observed = %v, want %v", got, wantTimed)
			}
		})
	}
}

func TestReadToolsRunConcurrently(t *testing.T) {
	const n = 4
	var (
		mu      sync.Mutex
		started int
		all     = make(chan struct{})
	)
	// Each call waits until every call of the batch has started: serial
	// execution would never get there, and the deadline turns that into a
	// failed result instead of a hung test.
	barrier := funcTool{name: "fetch", fn: func(ctx context.Context, _ *TurnContext, args json.RawMessage) (Result, error) {
		mu.Lock()
		started++
		if started == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			return Result{Content: "fetched " + string(args)}, nil
		case <-time.After(10 * time.Second):
			return Result{}, errors.New("barrier: the calls did not run concurrently")
		}
	}}
	h := newHarness(t, Config{}, []Tool{barrier})
	var calls []openaitest.ToolCall
	for i := range n {
		calls = append(calls, openaitest.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: "fetch", Arguments: fmt.Sprintf(`{"i":%d}`, i)})
	}
	h.srv.Script(openaitest.Tools(calls...), openaitest.Text("done"))
	res := h.run(t, TurnRequest{UserText: "fetch all"})

	tools := res.Messages[2 : 2+n]
	for i, m := range tools {
		_, content, _ := UnwrapToolResult(m.Content)
		if m.ToolCallID != fmt.Sprintf("call_%d", i) || content != fmt.Sprintf(`fetched {"i":%d}`, i) {
			t.Errorf("tool message %d = %+v, want call_%d's result in call order", i, m, i)
		}
	}
}

func TestWriteToolsNeverOverlap(t *testing.T) {
	var (
		inFlight, maxInFlight atomic.Int32
		mu                    sync.Mutex
		order                 []string
	)
	write := funcTool{name: "save", writes: true, fn: func(_ context.Context, _ *TurnContext, args json.RawMessage) (Result, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		mu.Lock()
		order = append(order, string(args))
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // widen the window an overlap would need
		return Result{Content: "saved"}, nil
	}}
	h := newHarness(t, Config{}, []Tool{write, textTool("read", "data")})
	var calls []openaitest.ToolCall
	var want []string
	for i := range 5 {
		args := fmt.Sprintf(`{"n":%d}`, i)
		calls = append(calls, openaitest.Call("save", args), openaitest.Call("read", "{}"))
		want = append(want, args)
	}
	h.srv.Script(openaitest.Tools(calls...), openaitest.Text("done"))
	res := h.run(t, TurnRequest{UserText: "save all"})
	if got := maxInFlight.Load(); got != 1 {
		t.Errorf("max write tools in flight = %d, want 1", got)
	}
	if !slices.Equal(order, want) {
		t.Errorf("write order = %v, want the model's order %v", order, want)
	}
	assistant := res.Messages[1]
	for i, m := range res.Messages[2 : 2+len(calls)] {
		if m.ToolCallID != assistant.ToolCalls[i].ID || m.Name != assistant.ToolCalls[i].Name {
			t.Errorf("tool message %d answers %s/%s, want %s/%s", i, m.Name, m.ToolCallID, assistant.ToolCalls[i].Name, assistant.ToolCalls[i].ID)
		}
	}
}

func TestMaxToolIterations(t *testing.T) {
	loop := func(req openai.ChatCompletionRequest) openaitest.Step {
		if len(req.Tools) == 0 {
			return openaitest.Text("giving up")
		}
		return openaitest.Tools(openaitest.Call("ping", "{}"))
	}
	h := newHarness(t, Config{MaxToolIterations: 3}, []Tool{textTool("ping", "pong")}, openaitest.WithResponder(loop))
	res := h.run(t, TurnRequest{UserText: "loop"})
	if res.Iterations != 3 || res.Reply != "giving up" || res.Failed {
		t.Errorf("result = %+v, want 3 iterations then the tool-less answer", res)
	}
	reqs := h.srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("requests = %d, want 3 with tools + 1 final", len(reqs))
	}
	for i, req := range reqs[:3] {
		if len(req.Tools) != 1 {
			t.Errorf("request %d offered %d tools, want 1", i, len(req.Tools))
		}
	}
	final := reqs[3]
	if len(final.Tools) != 0 {
		t.Errorf("final request offered tools %v", toolNames(final))
	}
	if note := final.Messages[len(final.Messages)-1]; note.Role != "user" || note.Content != budgetNote {
		t.Errorf("final request ends with %+v, want the budget note", note)
	}
	if final.Messages[0].Content != reqs[0].Messages[0].Content {
		t.Error("the final request changed the system prompt")
	}
	// user + 3 × (call + result) + answer; the note is not stored.
	if len(res.Messages) != 8 || res.Messages[7].Content != "giving up" {
		t.Errorf("Messages = %+v", res.Messages)
	}

	t.Run("model calls tools anyway", func(t *testing.T) {
		stubborn := func(openai.ChatCompletionRequest) openaitest.Step {
			return openaitest.Tools(openaitest.Call("ping", "{}"))
		}
		h := newHarness(t, Config{MaxToolIterations: 1}, []Tool{textTool("ping", "pong")}, openaitest.WithResponder(stubborn))
		res := h.run(t, TurnRequest{UserText: "loop"})
		if res.Reply != EmptyReply || h.srv.RequestCount() != 2 {
			t.Errorf("reply = %q after %d requests", res.Reply, h.srv.RequestCount())
		}
		last := res.Messages[len(res.Messages)-1]
		if last.Role != "assistant" || len(last.ToolCalls) != 0 {
			t.Errorf("last stored message = %+v, want a plain answer (no unanswered calls)", last)
		}
	})
}

func TestInjectionsFollowTheBatch(t *testing.T) {
	load := funcTool{name: "load_skill", fn: func(_ context.Context, _ *TurnContext, args json.RawMessage) (Result, error) {
		var a struct{ Name string }
		if err := json.Unmarshal(args, &a); err != nil {
			return Result{}, err
		}
		return Result{
			Content: "loaded " + a.Name,
			Inject:  []sessions.Message{{Content: "[PARLEY_SKILL_INJECTION] " + a.Name}},
		}, nil
	}}
	var seen []sessions.Message
	peek := funcTool{name: "peek", fn: func(_ context.Context, tc *TurnContext, _ json.RawMessage) (Result, error) {
		seen = tc.History
		return Result{Content: "peeked"}, nil
	}}
	h := newHarness(t, Config{}, []Tool{load, peek, textTool("other", "x")})
	h.srv.Script(
		openaitest.Tools(
			openaitest.ToolCall{ID: "c1", Name: "load_skill", Arguments: `{"name":"a"}`},
			openaitest.ToolCall{ID: "c2", Name: "other", Arguments: `{}`},
			openaitest.ToolCall{ID: "c3", Name: "load_skill", Arguments: `{"name":"b"}`},
		),
		openaitest.Tools(openaitest.ToolCall{ID: "c4", Name: "peek", Arguments: `{}`}),
		openaitest.Text("done"),
	)
	res := h.run(t, TurnRequest{UserText: "use skills"})

	type brief struct{ Role, ID, Kind, Content string }
	var got []brief
	for _, m := range res.Messages[2:7] {
		got = append(got, brief{m.Role, m.ToolCallID, m.Kind, m.Content})
	}
	want := []brief{
		{"tool", "c1", "", WrapToolResult("load_skill", "loaded a")},
		{"tool", "c2", "", WrapToolResult("other", "x")},
		{"tool", "c3", "", WrapToolResult("load_skill", "loaded b")},
		{"user", "", sessions.KindInjection, "[PARLEY_SKILL_INJECTION] a"},
		{"user", "", sessions.KindInjection, "[PARLEY_SKILL_INJECTION] b"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("messages after the call:\n got %+v\nwant %+v", got, want)
	}

	// The model sees the injections as user messages right after the batch.
	second := simplify(h.srv.Requests()[1].Messages)
	tail := second[len(second)-2:]
	if tail[0].Role != "user" || tail[0].Content != "[PARLEY_SKILL_INJECTION] a" || tail[1].Content != "[PARLEY_SKILL_INJECTION] b" {
		t.Errorf("second request ends with %+v", tail)
	}
	// A tool of a later iteration sees the injections of the same turn.
	if !slices.ContainsFunc(seen, func(m sessions.Message) bool {
		return m.Kind == sessions.KindInjection && strings.HasSuffix(m.Content, " b")
	}) {
		t.Errorf("peek saw history %+v without the injection", seen)
	}
}

func TestSanitisedHistorySent(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	history := []sessions.Message{
		{Role: "tool", ToolCallID: "gone", Content: "orphan from a trimmed turn"},
		{Role: "assistant", Content: "tail of a trimmed turn"},
		{Role: "user", Content: "q1"},
		{Role: "assistant", ToolCalls: []sessions.ToolCall{{ID: "lost", Name: "x", Arguments: "{}"}}},
		{Role: "assistant", Content: "a1"},
		{Role: "user", Kind: sessions.KindSummary, Content: "summary"},
		{Role: "user", Kind: sessions.KindInjection, Content: "skill body"},
	}
	h.run(t, TurnRequest{History: stored(t, history...), UserText: "q2"})
	got := simplify(h.srv.Requests()[0].Messages[1:])
	want := []wireMsg{
		{Role: "user", Content: "q1"},
		{Role: "assistant", Content: "a1"},
		{Role: "user", Content: "summary"},
		{Role: "user", Content: "skill body"},
		{Role: "user", Content: "q2"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sent history:\n got %+v\nwant %+v", got, want)
	}
}

func TestTokenUsage(t *testing.T) {
	usage := func(p, c, cached int) openai.Usage {
		return openai.Usage{PromptTokens: p, CompletionTokens: c, PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: cached}}
	}
	h := newHarness(t, Config{}, []Tool{textTool("clock", "noon")})
	h.srv.Script(
		openaitest.Error(500),
		openaitest.Tools(openaitest.Call("clock", "{}")).WithUsage(usage(100, 10, 40)),
		openaitest.Text("noon").WithUsage(usage(150, 5, 90)),
	)
	res := h.run(t, TurnRequest{Channel: "feishu", UserText: "time?"})
	if want := (Usage{Prompt: 250, Completion: 15, Cached: 130}); res.Usage != want {
		t.Errorf("Usage = %+v, want %+v", res.Usage, want)
	}
	for kind, want := range map[string]float64{"prompt": 250, "completion": 15, "cached": 130} {
		if got := metricValue(t, h.m, "parley_llm_tokens_total", map[string]string{"channel": "feishu", "model": "default", "kind": kind}); got != want {
			t.Errorf("tokens{kind=%s} = %v, want %v", kind, got, want)
		}
	}
	if got := metricValue(t, h.m, "parley_llm_request_duration_seconds", map[string]string{"outcome": "ok"}); got != 2 {
		t.Errorf("latency observations{ok} = %v, want 2", got)
	}
}

func TestNilMetricsAndLogger(t *testing.T) {
	srv := openaitest.New(t)
	srv.Script(openaitest.Error(500), openaitest.Tools(openaitest.Call("nosuch", "{}")))
	a := New(Config{Model: "m", MaxRetries: 1, BackoffBase: time.Microsecond}, NewClient(srv.URL(), "k", nil), nil, nil, nil)
	res, err := a.Run(context.Background(), TurnRequest{UserText: "hi"})
	if err != nil || res.Failed || res.Reply != "echo: hi" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}

func TestEmptyFinalAnswer(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	h.srv.Script(openaitest.Step{Raw: `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}]}`})
	res := h.run(t, TurnRequest{UserText: "hi"})
	if res.Reply != EmptyReply || res.Messages[1].Content != EmptyReply {
		t.Errorf("result = %+v, want the fallback reply stored", res)
	}
}

func TestNormaliseCalls(t *testing.T) {
	got := normaliseCalls([]openai.ToolCall{
		{ID: "a", Function: openai.FunctionCall{Name: "x", Arguments: `{"k":1}`}},
		{ID: "", Function: openai.FunctionCall{Name: "y"}},
		{ID: "a", Function: openai.FunctionCall{Name: "z", Arguments: "{}"}},
	})
	if got[0].ID != "a" || got[1].ID == "" || got[2].ID == "a" || got[1].ID == got[2].ID {
		t.Errorf("ids = %q %q %q, want unique non-empty ids", got[0].ID, got[1].ID, got[2].ID)
	}
	if got[1].Arguments != "{}" || got[0].Arguments != `{"k":1}` {
		t.Errorf("arguments = %q, %q", got[0].Arguments, got[1].Arguments)
	}
}
