package openaitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

func client(s *Server) *openai.Client {
	cfg := openai.DefaultConfig("test-key")
	cfg.BaseURL = s.URL()
	return openai.NewClientWithConfig(cfg)
}

func ask(t *testing.T, c *openai.Client, text string) (openai.ChatCompletionResponse, error) {
	t.Helper()
	return c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model:    "test-model",
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: text}},
	})
}

// post sends body to path and decodes the JSON answer into a generic map, to
// check the wire format without go-openai's forgiving decoder in the way.
func post(t *testing.T, s *Server, path, body string) (int, map[string]any) {
	t.Helper()
	base := strings.TrimSuffix(s.URL(), "/v1")
	resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("POST %s: body %q is not JSON: %v", path, raw, err)
	}
	return resp.StatusCode, m
}

func TestWireFormat(t *testing.T) {
	s := New(t)
	s.Script(
		Text("hello"),
		Tools(ToolCall{ID: "call_x", Name: "weather", Arguments: `{"city":"Paris"}`}),
	)
	const req = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`

	code, text := post(t, s, "/v1/chat/completions", req)
	if code != http.StatusOK {
		t.Fatalf("status = %d", code)
	}
	if text["object"] != "chat.completion" || text["id"] == "" || text["model"] != "m" {
		t.Errorf("envelope = %v", text)
	}
	choice := text["choices"].([]any)[0].(map[string]any)
	msg := choice["message"].(map[string]any)
	if msg["role"] != "assistant" || msg["content"] != "hello" || choice["finish_reason"] != "stop" {
		t.Errorf("text choice = %v", choice)
	}
	usage := text["usage"].(map[string]any)
	for _, k := range []string{"prompt_tokens", "completion_tokens", "total_tokens"} {
		if _, ok := usage[k].(float64); !ok {
			t.Errorf("usage.%s missing: %v", k, usage)
		}
	}
	if _, ok := usage["prompt_tokens_details"].(map[string]any)["cached_tokens"]; !ok {
		t.Errorf("usage.prompt_tokens_details.cached_tokens missing: %v", usage)
	}

	// The same route without /v1, as some clients are configured.
	code, calls := post(t, s, "/chat/completions", req)
	if code != http.StatusOK {
		t.Fatalf("status = %d", code)
	}
	choice = calls["choices"].([]any)[0].(map[string]any)
	msg = choice["message"].(map[string]any)
	if choice["finish_reason"] != "tool_calls" {
		t.Errorf("finish_reason = %v", choice["finish_reason"])
	}
	if c, present := msg["content"]; !present || c != nil {
		t.Errorf("content = %v (present %v), want null as OpenAI sends", c, present)
	}
	tc := msg["tool_calls"].([]any)[0].(map[string]any)
	fn := tc["function"].(map[string]any)
	if tc["id"] != "call_x" || tc["type"] != "function" || fn["name"] != "weather" || fn["arguments"] != `{"city":"Paris"}` {
		t.Errorf("tool call = %v", tc)
	}
}

func TestScriptThenEcho(t *testing.T) {
	s := New(t)
	c := client(s)
	s.Script(Text("first"), Tools(Call("a", `{}`), Call("b", `{"x":1}`)))

	resp, err := ask(t, c, "one")
	if err != nil || resp.Choices[0].Message.Content != "first" {
		t.Fatalf("first = %+v, %v", resp.Choices, err)
	}
	resp, err = ask(t, c, "two")
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Choices[0].Message.ToolCalls
	if len(got) != 2 || got[0].ID == "" || got[0].ID == got[1].ID || got[1].Function.Name != "b" || got[0].Type != openai.ToolTypeFunction {
		t.Errorf("tool calls = %+v, want two calls with distinct generated ids", got)
	}
	resp, err = ask(t, c, "three")
	if err != nil || resp.Choices[0].Message.Content != "echo: three" {
		t.Fatalf("echo = %+v, %v", resp.Choices, err)
	}
	if n := s.RequestCount(); n != 3 {
		t.Errorf("RequestCount = %d, want 3", n)
	}
	if s.Remaining() != 0 {
		t.Errorf("Remaining = %d", s.Remaining())
	}
}

func TestErrorSteps(t *testing.T) {
	tests := []struct {
		name       string
		step       Step
		wantStatus int
		wantHeader string
	}{
		{"server error", Error(500), 500, ""},
		{"rate limit with retry-after", Error(429).WithHeader("Retry-After", "1"), 429, "1"},
		{"unauthorized with body", Error(401).WithBody(`{"error":{"message":"bad key","type":"invalid_request_error"}}`), 401, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(t)
			s.Script(tt.step)
			resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[]}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if got := resp.Header.Get("Retry-After"); got != tt.wantHeader {
				t.Errorf("Retry-After = %q, want %q", got, tt.wantHeader)
			}
			var body openai.ErrorResponse
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error == nil || body.Error.Message == "" {
				t.Errorf("error body = %+v, %v; want an OpenAI error object", body.Error, err)
			}
		})
	}

	t.Run("go-openai sees the status", func(t *testing.T) {
		s := New(t)
		s.Script(Error(503))
		_, err := ask(t, client(s), "x")
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 503 {
			t.Fatalf("err = %v, want an APIError with status 503", err)
		}
	})
}

func TestMalformed(t *testing.T) {
	s := New(t)
	s.Script(Malformed(""), Malformed("not json"))
	for range 2 {
		if _, err := ask(t, client(s), "x"); err == nil {
			t.Fatal("malformed body decoded without error")
		}
	}
}

func TestDelayEndsWithTheRequest(t *testing.T) {
	s := New(t)
	s.Script(Delay(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := client(s).CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "x"}}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the client's deadline", err)
	}
	// The cleanup (server Close) would block for an hour if the handler
	// ignored the cancelled request; the test finishing proves it does not.
}

func TestDelayThenAnswer(t *testing.T) {
	s := New(t)
	s.Script(Text("late").WithDelay(time.Millisecond), Delay(time.Millisecond))
	c := client(s)
	if resp, err := ask(t, c, "x"); err != nil || resp.Choices[0].Message.Content != "late" {
		t.Fatalf("got %+v, %v", resp.Choices, err)
	}
	if resp, err := ask(t, c, "y"); err != nil || resp.Choices[0].Message.Content != "echo: y" {
		t.Fatalf("got %+v, %v", resp.Choices, err)
	}
}

func TestResponderAndUsage(t *testing.T) {
	s := New(t, WithResponder(func(req openai.ChatCompletionRequest) Step {
		return Text(fmt.Sprintf("%d messages", len(req.Messages)))
	}), WithCachedTokens(3))
	c := client(s)
	resp, err := ask(t, c, "x")
	if err != nil || resp.Choices[0].Message.Content != "1 messages" {
		t.Fatalf("got %+v, %v", resp.Choices, err)
	}
	u := resp.Usage
	if u.PromptTokens <= 0 || u.CompletionTokens <= 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage = %+v", u)
	}
	if u.PromptTokensDetails == nil || u.PromptTokensDetails.CachedTokens != 3 {
		t.Errorf("cached = %+v, want 3", u.PromptTokensDetails)
	}

	s.SetCachedTokens(1 << 30) // capped at the prompt tokens
	resp, err = ask(t, c, "x")
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Usage.PromptTokensDetails.CachedTokens; got != resp.Usage.PromptTokens {
		t.Errorf("cached = %d, want the prompt tokens %d", got, resp.Usage.PromptTokens)
	}

	s.Script(Text("x").WithUsage(openai.Usage{PromptTokens: 7, CompletionTokens: 2, PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: 5}}))
	resp, err = ask(t, c, "x")
	if err != nil {
		t.Fatal(err)
	}
	if u := resp.Usage; u.PromptTokens != 7 || u.CompletionTokens != 2 || u.TotalTokens != 9 || u.PromptTokensDetails.CachedTokens != 5 {
		t.Errorf("scripted usage = %+v", u)
	}
}

func TestRequestsAreCopies(t *testing.T) {
	s := New(t)
	if _, err := ask(t, client(s), "original"); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	reqs[0].Messages[0].Content = "changed"
	raw := s.RawRequests()
	raw[0][0] = 'X'
	if got := s.Requests()[0].Messages[0].Content; got != "original" {
		t.Errorf("stored request changed to %q", got)
	}
	if !bytes.Contains(s.RawRequests()[0], []byte(`"original"`)) || s.RawRequests()[0][0] == 'X' {
		t.Error("stored raw body changed")
	}
	if got := s.Headers()[0].Get("Authorization"); got != "Bearer test-key" {
		t.Errorf("Authorization = %q", got)
	}
}

func TestAPIKey(t *testing.T) {
	s := New(t, WithAPIKey("right"))
	s.Script(Text("scripted"))

	cfg := openai.DefaultConfig("wrong")
	cfg.BaseURL = s.URL()
	_, err := openai.NewClientWithConfig(cfg).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "m"})
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusUnauthorized {
		t.Fatalf("err = %v, want 401", err)
	}
	if s.Remaining() != 1 {
		t.Error("a refused request consumed a scripted step")
	}

	cfg = openai.DefaultConfig("right")
	cfg.BaseURL = s.URL()
	resp, err := openai.NewClientWithConfig(cfg).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "m"})
	if err != nil || resp.Choices[0].Message.Content != "scripted" {
		t.Fatalf("got %+v, %v", resp.Choices, err)
	}
}

func TestOtherRoutes(t *testing.T) {
	s := New(t)
	base := strings.TrimSuffix(s.URL(), "/v1")
	for _, tt := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/v1/chat/completions", http.StatusMethodNotAllowed},
		{http.MethodPost, "/v1/embeddings", http.StatusNotFound},
	} {
		req, _ := http.NewRequest(tt.method, base+tt.path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%s %s = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.want)
		}
	}
	if code, _ := post(t, s, "/v1/chat/completions", `{"model":`); code != http.StatusBadRequest {
		t.Errorf("bad JSON = %d, want 400", code)
	}
}

func TestConcurrentRequests(t *testing.T) {
	s := New(t)
	c := client(s)
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			text := fmt.Sprintf("message %d", i)
			resp, err := c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
				Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: text}},
			})
			if err != nil {
				errs <- err
				return
			}
			if got := resp.Choices[0].Message.Content; got != "echo: "+text {
				errs <- fmt.Errorf("got %q for %q", got, text)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := s.RequestCount(); got != n {
		t.Errorf("RequestCount = %d, want %d", got, n)
	}
	if got := len(s.Requests()); got != n {
		t.Errorf("len(Requests) = %d, want %d", got, n)
	}
}

// TestStreamingWireFormat: go-openai's own streaming client reads the
// fake's event stream into the answer that was scripted: the text, tool
// calls whose arguments arrive in pieces (interleaved between calls), the
// finish reason, and the usage in the last chunk.
func TestStreamingWireFormat(t *testing.T) {
	s := New(t, WithChunkRunes(2), WithArgumentChunks(3), WithInterleavedCalls())
	s.Script(Step{Text: "Grüße 这是", ToolCalls: []ToolCall{
		{ID: "call_a", Name: "weather", Arguments: `{"city":"Zürich"}`},
		{ID: "call_b", Name: "clock", Arguments: `{"tz":"UTC"}`},
	}})
	stream, err := client(s).CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
		Model:         "test-model",
		Messages:      []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}},
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var text strings.Builder
	args := map[int]*strings.Builder{}
	ids, names := map[int]string{}, map[int]string{}
	var finish openai.FinishReason
	var usage *openai.Usage
	chunks := 0
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		chunks++
		if c.Usage != nil {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
			for _, d := range ch.Delta.ToolCalls {
				i := *d.Index
				if args[i] == nil {
					args[i] = &strings.Builder{}
				}
				if d.ID != "" {
					ids[i] = d.ID
				}
				if d.Function.Name != "" {
					names[i] = d.Function.Name
				}
				args[i].WriteString(d.Function.Arguments)
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if text.String() != "Grüße 这是" || finish != openai.FinishReasonToolCalls {
		t.Errorf("text %q, finish %q", text.String(), finish)
	}
	if ids[0] != "call_a" || names[0] != "weather" || args[0].String() != `{"city":"Zürich"}` ||
		ids[1] != "call_b" || names[1] != "clock" || args[1].String() != `{"tz":"UTC"}` {
		t.Errorf("calls: ids %v names %v args %q %q", ids, names, args[0], args[1])
	}
	if usage == nil || usage.PromptTokens == 0 || usage.CompletionTokens == 0 {
		t.Errorf("usage = %+v, want it in the last chunk", usage)
	}
	if chunks < 10 {
		t.Errorf("%d chunks; want the answer in many pieces", chunks)
	}
}

// TestStreamingRefusedAndIgnored: RefusingStreaming answers 400 without
// using a step; WithoutStreaming answers JSON to a streaming request.
func TestStreamingRefusedAndIgnored(t *testing.T) {
	const req = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	refusing := New(t, RefusingStreaming())
	refusing.Script(Text("scripted"))
	if code, body := post(t, refusing, "/v1/chat/completions", req); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body), "stream") {
		t.Fatalf("refusing: %d %v", code, body)
	}
	if refusing.Remaining() != 1 {
		t.Error("the refusal used a scripted step")
	}
	whole := New(t, WithoutStreaming())
	whole.Script(Text("scripted"))
	if code, body := post(t, whole, "/v1/chat/completions", req); code != http.StatusOK || body["object"] != "chat.completion" {
		t.Fatalf("without streaming: %d %v", code, body)
	}
}
