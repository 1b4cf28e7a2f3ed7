package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/sessions"
	openai "github.com/sashabaranov/go-openai"
)

// recorder collects a turn's events.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) add(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// shown is the text a listener shows at the end: the pieces since the
// last reset.
func (r *recorder) shown() string {
	var b strings.Builder
	for _, e := range r.all() {
		switch e.Kind {
		case EventText:
			b.WriteString(e.Text)
		case EventReset:
			b.Reset()
		}
	}
	return b.String()
}

func (r *recorder) count(k EventKind) int {
	n := 0
	for _, e := range r.all() {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// TestStreamedAnswerEqualsWholeAnswer: the same answers, streamed in small
// pieces and sent whole, come out of complete as the same message.
func TestStreamedAnswerEqualsWholeAnswer(t *testing.T) {
	steps := []openaitest.Step{
		openaitest.Text("Grüße — 这是 a longer answer 🙂 with \"quotes\", <tags> and\nnew lines."),
		openaitest.Tools(
			openaitest.ToolCall{ID: "call_a", Name: "weather", Arguments: `{"city":"Zürich","days":[1,2,3]}`},
			openaitest.ToolCall{ID: "call_b", Name: "clock", Arguments: `{}`},
			openaitest.ToolCall{ID: "call_c", Name: "search", Arguments: `{"q":"这是 \"quoted\" text, long enough to be split several times"}`},
		),
		{Text: "thinking aloud", ToolCalls: []openaitest.ToolCall{{ID: "call_d", Name: "clock", Arguments: `{"tz":"UTC"}`}}},
		{Text: "cut here", FinishReason: "length"},
	}
	answers := func(opts ...openaitest.Option) []openai.ChatCompletionMessage {
		h := newHarness(t, Config{}, nil, opts...)
		h.srv.Script(steps...)
		var out []openai.ChatCompletionMessage
		for range steps {
			var u Usage
			msg, finish, err := h.agent.complete(context.Background(), h.agent.primary, "console", []byte(`{"model":"m","messages":[]}`), &u, nil)
			if err != nil {
				t.Fatal(err)
			}
			if u.Prompt == 0 || u.Completion == 0 {
				t.Errorf("usage = %+v, want tokens counted", u)
			}
			msg.Refusal = string(finish) // compared along with the message
			out = append(out, msg)
		}
		return out
	}
	whole := answers(openaitest.WithoutStreaming())
	streamed := answers(openaitest.WithChunkRunes(1), openaitest.WithArgumentChunks(1), openaitest.WithInterleavedCalls())
	if !reflect.DeepEqual(streamed, whole) {
		t.Fatalf("streamed answers\n%+v\nwant, as sent whole,\n%+v", streamed, whole)
	}
}

// TestToolCallDeltasAssembledByIndex: tool calls whose arguments arrive in
// many chunks, interleaved between calls, run with exactly the arguments
// the model wrote, and are stored in index order.
func TestToolCallDeltasAssembledByIndex(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{}
	tool := func(name string) funcTool {
		return funcTool{name: name, fn: func(_ context.Context, _ *TurnContext, args json.RawMessage) (Result, error) {
			mu.Lock()
			defer mu.Unlock()
			got[name] = string(args)
			return Result{Content: "ok"}, nil
		}}
	}
	h := newHarness(t, Config{}, []Tool{tool("alpha"), tool("beta"), tool("gamma")},
		openaitest.WithArgumentChunks(2), openaitest.WithInterleavedCalls())
	want := map[string]string{
		"alpha": `{"text":"` + strings.Repeat("a long argument, ", 20) + `"}`,
		"beta":  `{"n":12345,"nested":{"list":["x","y","这是"]}}`,
		"gamma": `{"emoji":"🙂🙂🙂","escaped":"line\nbreak \"q\""}`,
	}
	h.srv.Script(openaitest.Tools(
		openaitest.Call("alpha", want["alpha"]),
		openaitest.Call("beta", want["beta"]),
		openaitest.Call("gamma", want["gamma"]),
	), openaitest.Text("done"))
	res := h.run(t, TurnRequest{UserText: "go"})
	if res.Reply != "done" || res.Iterations != 1 {
		t.Fatalf("result = %+v", res)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("tools ran with\n%v\nwant\n%v", got, want)
	}
	var names []string
	for _, c := range res.Messages[1].ToolCalls {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "alpha,beta,gamma" {
		t.Errorf("stored calls = %v, want in index order", names)
	}
}

// sse is a server answering every request with body as an event stream.
func sse(t *testing.T, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestStreamDialects: what other servers send is assembled too: calls
// opening out of index order, calls without an index, the name repeated
// in every piece, keep-alive comments, CRLF line ends, no [DONE], and a
// second choice that is not the answer.
func TestStreamDialects(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		want       openai.ChatCompletionMessage
	}{{
		name: "index order",
		body: "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"b\",\"type\":\"function\",\"function\":{\"name\":\"second\",\"arguments\":\"{\\\"x\\\"\"}}]}}]}\n\n" +
			": keep-alive\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"first\",\"arguments\":\"\"}}]}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\":1}\"}}]}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n",
		want: openai.ChatCompletionMessage{Role: "assistant", ToolCalls: []openai.ToolCall{
			{ID: "a", Type: "function", Function: openai.FunctionCall{Name: "first", Arguments: "{}"}},
			{ID: "b", Type: "function", Function: openai.FunctionCall{Name: "second", Arguments: `{"x":1}`}},
		}},
	}, {
		name: "no index, name repeated, CRLF, no DONE",
		body: "event: message\r\ndata:{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\r\n\r\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}},{\"index\":1,\"delta\":{\"content\":\"other choice\"}}]}\r\n\r\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":\"}}]}}]}\r\n\r\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"1}\"}}]}}]}\r\n\r\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"b\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]}}]}\r\n\r\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":null}\r\n\r\n",
		want: openai.ChatCompletionMessage{Role: "assistant", Content: "Hello", ToolCalls: []openai.ToolCall{
			{ID: "a", Type: "function", Function: openai.FunctionCall{Name: "f", Arguments: `{"a":1}`}},
			{ID: "b", Type: "function", Function: openai.FunctionCall{Name: "g", Arguments: "{}"}},
		}},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			srv := sse(t, tt.body)
			resp, _, whole, err := NewClient(srv.URL, "k", nil).sendStream(context.Background(), []byte(`{}`), time.Minute, nil)
			if err != nil || whole {
				t.Fatalf("sendStream: whole %v, %v", whole, err)
			}
			if got := resp.Choices[0].Message; !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("assembled\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// TestBrokenStreamsAreRetried: a chunk that is not JSON, an error object
// in the stream, a stream without a finish and one without any choice are
// bad answers: retried, and counted as such.
func TestBrokenStreamsAreRetried(t *testing.T) {
	for name, body := range map[string]string{
		"not json":     "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hal\n\n",
		"error object": "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half\"}}]}\n\ndata: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n",
		"no finish":    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half\"}}]}\n\ndata: [DONE]\n\n",
		"no choice":    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\n\ndata: [DONE]\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Config{}, nil)
			raw := openaitest.Step{Raw: body}.WithHeader("Content-Type", "text/event-stream")
			h.srv.Script(raw, openaitest.Text("recovered"))
			var rec recorder
			res := h.run(t, TurnRequest{UserText: "hi", Events: rec.add})
			if res.Failed || res.Reply != "recovered" {
				t.Fatalf("result = %+v, want the retry's answer", res)
			}
			if got := rec.shown(); got != "recovered" {
				t.Errorf("shown at the end: %q, want only the answer", got)
			}
			if n := h.srv.RequestCount(); n != 2 {
				t.Errorf("requests = %d, want 2", n)
			}
		})
	}
}

// TestStreamCutMidwayIsRetriedWithoutDuplicates: a connection that drops
// halfway through the answer is retried; the text shown of the first
// attempt is withdrawn (EventReset) before the second writes anew, so the
// listener ends with the answer exactly once.
func TestStreamCutMidwayIsRetriedWithoutDuplicates(t *testing.T) {
	const answer = "The rollback job is on the deploy dashboard; run it, then watch the error rate."
	h := newHarness(t, Config{}, nil, openaitest.WithChunkRunes(5))
	h.srv.Script(openaitest.Text(answer).CutAfter(6), openaitest.Text(answer))
	var rec recorder
	res := h.run(t, TurnRequest{UserText: "how do I roll back?", Events: rec.add})
	if res.Failed || res.Reply != answer {
		t.Fatalf("result = %+v", res)
	}
	if rec.count(EventReset) != 1 {
		t.Fatalf("events = %+v, want one reset between the attempts", rec.all())
	}
	first := rec.all()[0]
	if first.Kind != EventText || !strings.HasPrefix(answer, first.Text) {
		t.Errorf("first event = %+v, want the start of the answer", first)
	}
	if got := rec.shown(); got != answer {
		t.Errorf("shown at the end:\n%q\nwant the answer once:\n%q", got, answer)
	}
	if n := metricValue(t, h.m, "parley_llm_requests_total", map[string]string{"model": "default", "outcome": "retry"}); n != 1 {
		t.Errorf("retried attempts = %v, want 1", n)
	}
}

// TestModelThatDoesNotStream: a server answering JSON to a streaming
// request, and one refusing "stream" with a 400, both answer; the agent
// remembers and asks the next turns without "stream".
func TestModelThatDoesNotStream(t *testing.T) {
	for _, tt := range []struct {
		name      string
		opt       openaitest.Option
		firstTurn int // requests of the first turn
	}{
		{"answers json", openaitest.WithoutStreaming(), 1},
		{"400 on stream", openaitest.RefusingStreaming(), 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{MaxRetries: -1}, nil, tt.opt)
			var rec recorder
			for i, want := range []string{"echo: one", "echo: two", "echo: three"} {
				res := h.run(t, TurnRequest{UserText: strings.TrimPrefix(want, "echo: "), Events: rec.add})
				if res.Failed || res.Reply != want {
					t.Fatalf("turn %d = %+v", i, res)
				}
				if res.Usage.Prompt == 0 {
					t.Errorf("turn %d: no usage", i)
				}
			}
			reqs := h.srv.Requests()
			if len(reqs) != tt.firstTurn+2 {
				t.Fatalf("requests = %d, want %d then one a turn", len(reqs), tt.firstTurn)
			}
			if !reqs[0].Stream {
				t.Error("the first request did not ask to stream")
			}
			for i, r := range reqs[tt.firstTurn:] {
				if r.Stream || r.StreamOptions != nil {
					t.Errorf("request %d asked to stream again", tt.firstTurn+i)
				}
			}
			if n := len(rec.all()); n != 0 {
				t.Errorf("events = %+v, want none from answers sent whole", rec.all())
			}
		})
	}
}

// TestBadRequestNotAboutStreamingIsNotResent: a 400 that does not name
// streaming is the request's own fault: one request, the
// misconfiguration apology, and the next turn still streams.
func TestBadRequestNotAboutStreamingIsNotResent(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	h.srv.Script(openaitest.Error(http.StatusBadRequest).WithBody(`{"error":{"message":"model not found","type":"invalid_request_error"}}`))
	if res := h.run(t, TurnRequest{UserText: "hi"}); res.Failure != Misconfigured {
		t.Fatalf("result = %+v", res)
	}
	h.run(t, TurnRequest{UserText: "again"})
	reqs := h.srv.Requests()
	if len(reqs) != 2 || !reqs[1].Stream {
		t.Fatalf("requests = %d (stream on the second: %v), want 2, the second streamed", len(reqs), len(reqs) == 2 && reqs[1].Stream)
	}
}

// TestUsageRecordedWhenStreaming: the usage of the stream's last chunk
// reaches the result and the token metrics.
func TestUsageRecordedWhenStreaming(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	h.srv.Script(openaitest.Text("hello").WithUsage(openai.Usage{PromptTokens: 120, CompletionTokens: 7,
		PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: 100}}))
	res := h.run(t, TurnRequest{UserText: "hi"})
	if res.Usage != (Usage{Prompt: 120, Completion: 7, Cached: 100}) {
		t.Fatalf("usage = %+v", res.Usage)
	}
	if !h.srv.Requests()[0].Stream {
		t.Fatal("the request did not stream")
	}
	for kind, want := range map[string]float64{"prompt": 120, "completion": 7, "cached": 100} {
		if got := metricValue(t, h.m, "parley_llm_tokens_total", map[string]string{"channel": "console", "model": "default", "kind": kind}); got != want {
			t.Errorf("%s tokens = %v, want %v", kind, got, want)
		}
	}
}

// TestStalledStreamTimesOut: a stream that stops sending is given up after
// the idle timeout, long before the attempt's own deadline, and counted
// as a timeout.
func TestStalledStreamTimesOut(t *testing.T) {
	h := newHarness(t, Config{Timeout: time.Minute, StreamIdleTimeout: 50 * time.Millisecond, MaxRetries: -1},
		nil, openaitest.WithChunkDelay(time.Minute))
	res := h.run(t, TurnRequest{UserText: "hi"})
	if !res.Failed || res.Failure != ModelDown {
		t.Fatalf("result = %+v, want the model-down apology", res)
	}
	if n := metricValue(t, h.m, "parley_outbound_failures_total", map[string]string{"integration": "model", "reason": "timeout", "outcome": "error"}); n != 1 {
		t.Errorf("timeouts counted = %v, want 1", n)
	}
}

// TestOversizedStreamIsCut: a stream past maxResponseBytes fails at once
// and is not asked for again.
func TestOversizedStreamIsCut(t *testing.T) {
	var requests int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		line := []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + strings.Repeat("A", 8<<10) + "\"}}]}\n\n")
		for {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	a := New(Config{Model: "m", MaxRetries: 3}, NewClient(srv.URL, "k", nil), nil, nil, nil)
	var rec recorder
	res, err := a.Run(context.Background(), TurnRequest{UserText: "hi", Events: rec.add})
	if err != nil || !res.Failed {
		t.Fatalf("Run = %+v, %v; want a failed turn", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if requests != 1 {
		t.Errorf("requests = %d, want 1", requests)
	}
	if rec.shown() != "" {
		t.Error("the text of the failed stream is still shown")
	}
}

// TestStreamFramingIsNotTheAnswersSize: a stream whose framing passes
// maxResponseBytes (one character an event, as a model streaming token by
// token sends) is read whole, since its answer is small; the answer itself
// is what maxResponseBytes bounds.
func TestStreamFramingIsNotTheAnswersSize(t *testing.T) {
	const events = 60_000 // ~80 bytes each: ~4.8 MB on the wire, 60 KB of text
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		bw := bufio.NewWriter(w)
		for range events {
			bw.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n")
		}
		bw.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
		bw.Flush()
	}))
	defer srv.Close()
	a := New(Config{Model: "m", MaxRetries: 1}, NewClient(srv.URL, "k", nil), nil, nil, nil)
	res, err := a.Run(context.Background(), TurnRequest{UserText: "hi"})
	if err != nil || res.Failed {
		t.Fatalf("Run = %+v, %v; want the answer", res.Failed, err)
	}
	if res.Reply != strings.Repeat("a", events) {
		t.Errorf("reply has %d bytes, want %d", len(res.Reply), events)
	}
}

// TestEventsOfATurn: the text that came with tool calls is withdrawn, the
// calls of registered tools are announced (an invented name is not), a
// loaded skill is announced, and the final answer streams.
func TestEventsOfATurn(t *testing.T) {
	skill := funcTool{name: "load_skill", fn: func(context.Context, *TurnContext, json.RawMessage) (Result, error) {
		return Result{Content: "loaded", Inject: []sessions.Message{injectionOf("deploys", "how to deploy")}}, nil
	}}
	h := newHarness(t, Config{}, []Tool{textTool("lookup", "found"), skill}, openaitest.WithChunkRunes(3))
	h.srv.Script(
		openaitest.Step{Text: "Let me check.", ToolCalls: []openaitest.ToolCall{
			openaitest.Call("lookup", `{}`), openaitest.Call("<script>", `{}`), openaitest.Call("load_skill", `{"name":"deploys"}`)}},
		openaitest.Text("All done."),
	)
	var rec recorder
	res := h.run(t, TurnRequest{UserText: "hi", Events: rec.add})
	if res.Reply != "All done." {
		t.Fatalf("result = %+v", res)
	}
	var kinds []string
	for _, e := range rec.all() {
		if e.Kind == EventText {
			if n := len(kinds); n > 0 && kinds[n-1] == "text" {
				continue
			}
			kinds = append(kinds, "text")
			continue
		}
		kinds = append(kinds, e.Kind.String()+":"+e.Name)
	}
	want := "text reset: tool:lookup tool:load_skill skill:deploys text"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("events = %v\nwant     %s", kinds, want)
	}
	if rec.shown() != "All done." {
		t.Errorf("shown at the end: %q", rec.shown())
	}
}

// BenchmarkStreamParse reads a streamed answer of 200 text chunks and its
// usage, as a model sends it, and reports the allocations of the parser
// and assembler.
func BenchmarkStreamParse(b *testing.B) {
	var body bytes.Buffer
	body.WriteString("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n")
	for range 200 {
		body.WriteString("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"system_fingerprint\":null,\"choices\":[{\"index\":0,\"delta\":{\"content\":\" word\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n")
	}
	body.WriteString("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
	body.WriteString("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":200,\"total_tokens\":210}}\n\n")
	body.WriteString("data: [DONE]\n\n")
	raw := body.Bytes()
	var sink int
	onText := func(s string) { sink += len(s) }
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		var s streamReader
		s.init(bufio.NewReaderSize(bytes.NewReader(raw), sseBufferBytes))
		for {
			data, err := s.next()
			if err != nil || bytes.Equal(data, doneMarker) {
				break
			}
			if err := s.asm.add(data, onText); err != nil {
				b.Fatal(err)
			}
		}
		if resp, err := s.asm.response(); err != nil || resp.Usage.CompletionTokens != 200 {
			b.Fatalf("response = %+v, %v", resp, err)
		}
	}
}
