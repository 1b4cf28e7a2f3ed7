// Package openaitest runs a fake OpenAI-compatible chat completions server
// for tests. It speaks the real wire format, so the code under test uses an
// unmodified go-openai client pointed at URL(), and it plays back a script of
// replies, tool calls, HTTP errors, delays and broken bodies in order. When the
// script runs out, a default responder answers "echo: <last user message>",
// which is enough for benchmarks and concurrency tests. A request asking to
// stream is answered as server-sent events, in pieces whose size and pace
// the options set (see stream.go), unless the server is made to answer
// whole or to refuse streaming.
//
// A Server is safe for concurrent requests. Scripted steps are handed out in
// arrival order, so tests that script several steps should send their
// requests one at a time.
package openaitest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Step is one scripted answer. Exactly one of Text/ToolCalls, Status or Raw
// normally applies:
//
//   - Status >= 400 answers with that HTTP status, Header and Body (an
//     OpenAI-style error JSON when Body is empty).
//   - Raw is sent verbatim with status 200 (or Status, when set) instead of a
//     completion: use it for malformed bodies.
//   - Otherwise a completion carrying Text and ToolCalls is sent.
//
// A Step with none of them set (the zero Step, or Delay(d)) is answered by the
// default responder. Delay is waited before answering in every case; the wait
// ends early when the client gives up on the request or the server closes.
type Step struct {
	Text      string
	ToolCalls []ToolCall

	Status int
	Header http.Header
	Body   string

	Raw string

	Delay time.Duration

	// Usage, when set, replaces the usage the server computes.
	Usage *openai.Usage
	// FinishReason defaults to "tool_calls" when ToolCalls is set, else "stop".
	FinishReason string

	cut int // chunks streamed before the connection drops (see CutAfter)
}

// ToolCall is one function call in a scripted answer. An empty ID is filled
// in with a generated one ("call_1", "call_2", … per server).
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Text returns a step that answers with an assistant message.
func Text(content string) Step { return Step{Text: content} }

// Tools returns a step that answers with tool calls.
func Tools(calls ...ToolCall) Step { return Step{ToolCalls: calls} }

// Call returns a tool call with a generated id. args is the JSON arguments
// string exactly as the model would send it (it may be invalid on purpose).
func Call(name, args string) ToolCall { return ToolCall{Name: name, Arguments: args} }

// Error returns a step that fails with the HTTP status.
func Error(status int) Step { return Step{Status: status} }

// Malformed returns a step whose 200 response body is body, verbatim. An
// empty body stands for a truncated completion JSON.
func Malformed(body string) Step {
	if body == "" {
		body = `{"id":"chatcmpl-broken","object":"chat.completion","choices":[{"index":0,"message":{"role":"assi`
	}
	return Step{Raw: body}
}

// Delay returns a step that waits d and then answers with the default
// responder; with d longer than the client's timeout it never answers.
func Delay(d time.Duration) Step { return Step{Delay: d} }

// WithHeader returns a copy of s with the response header key set to value.
func (s Step) WithHeader(key, value string) Step {
	h := s.Header.Clone()
	if h == nil {
		h = make(http.Header)
	}
	h.Set(key, value)
	s.Header = h
	return s
}

// WithBody returns a copy of s with the error body set.
func (s Step) WithBody(body string) Step { s.Body = body; return s }

// WithDelay returns a copy of s that waits d before answering.
func (s Step) WithDelay(d time.Duration) Step { s.Delay = d; return s }

// WithUsage returns a copy of s reporting u as its usage.
func (s Step) WithUsage(u openai.Usage) Step { s.Usage = &u; return s }

func (s Step) isEmpty() bool {
	return s.Text == "" && len(s.ToolCalls) == 0 && s.Status == 0 && s.Raw == ""
}

// Responder computes the answer to a request when the script is empty.
type Responder func(req openai.ChatCompletionRequest) Step

// Option configures a Server.
type Option func(*Server)

// WithResponder replaces the default "echo: <last user message>" responder.
func WithResponder(r Responder) Option { return func(s *Server) { s.responder = r } }

// WithCachedTokens sets the cached prompt tokens reported in every computed
// usage (capped at the prompt tokens). See also SetCachedTokens.
func WithCachedTokens(n int) Option { return func(s *Server) { s.cached = n } }

// WithAPIKey makes the server answer 401 unless the request carries
// "Authorization: Bearer key".
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// Server is a fake chat completions endpoint. Create it with New.
type Server struct {
	srv       *httptest.Server
	done      chan struct{} // closed on cleanup so delayed handlers end
	responder Responder
	apiKey    string

	noStream     bool // answer JSON even to streaming requests
	refuseStream bool // answer 400 to streaming requests

	mu         sync.Mutex
	chunkDelay time.Duration
	chunkRunes int
	argBytes   int
	interleave bool
	script     []Step
	raw        [][]byte
	headers    []http.Header
	cached     int
	nextCall   int
	nextResp   int
}

// New starts a server and registers its shutdown with t.Cleanup.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{done: make(chan struct{}), responder: Echo}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.handle)
	mux.HandleFunc("/chat/completions", s.handle)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, nil, "")
	})
	s.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		close(s.done)
		s.srv.Close()
	})
	return s
}

// Echo is the default responder: it answers "echo: " followed by the content
// of the last user message of the request.
func Echo(req openai.ChatCompletionRequest) Step {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == openai.ChatMessageRoleUser {
			return Text("echo: " + req.Messages[i].Content)
		}
	}
	return Text("echo: ")
}

// URL returns the base URL for an OpenAI client, ending in "/v1".
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Script queues steps; each request consumes the next one.
func (s *Server) Script(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, steps...)
}

// Remaining reports how many scripted steps have not been consumed yet.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

// SetCachedTokens sets the cached prompt tokens reported from now on.
func (s *Server) SetCachedTokens(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cached = n
}

// RequestCount reports how many chat completion requests arrived, including
// ones that were answered with an error.
func (s *Server) RequestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.raw)
}

// RawRequests returns copies of the request bodies, in arrival order.
func (s *Server) RawRequests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, len(s.raw))
	for i, b := range s.raw {
		out[i] = bytes.Clone(b)
	}
	return out
}

// Headers returns copies of the request headers, in arrival order.
func (s *Server) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]http.Header, len(s.headers))
	for i, h := range s.headers {
		out[i] = h.Clone()
	}
	return out
}

// Requests returns the decoded requests, in arrival order. Every call decodes
// the stored bodies afresh, so callers may modify what they get. A body that
// does not decode yields a zero request at its position.
func (s *Server) Requests() []openai.ChatCompletionRequest {
	raw := s.RawRequests()
	out := make([]openai.ChatCompletionRequest, len(raw))
	for i, b := range raw {
		_ = json.Unmarshal(b, &out[i])
	}
	return out
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, nil, "")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, nil, "")
		return
	}
	// A refused key consumes no step: the script describes what the model
	// would answer, and an unauthenticated request never reaches the model.
	// Nor does a refused stream.
	authorized := s.apiKey == "" || r.Header.Get("Authorization") == "Bearer "+s.apiKey
	var streaming struct {
		Stream        bool `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(body, &streaming)
	refused := authorized && streaming.Stream && s.refuseStream
	step, scripted := s.record(r, body, authorized && !refused)
	if !authorized {
		writeError(w, http.StatusUnauthorized, nil, "")
		return
	}
	if refused {
		writeError(w, http.StatusBadRequest, nil, errorJSON("invalid_request_error", "Unrecognized request argument supplied: stream"))
		return
	}
	var req openai.ChatCompletionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, nil, errorJSON("invalid_request_error", "could not parse the JSON body: "+err.Error()))
		return
	}
	if !scripted || step.isEmpty() {
		delay := step.Delay
		step = s.responder(req)
		if delay > 0 {
			step.Delay = delay
		}
	}
	if !s.delay(r, step.Delay) {
		return
	}
	usage := streaming.StreamOptions != nil && streaming.StreamOptions.IncludeUsage
	s.answer(w, r, req, len(body), step, usage)
}

// record keeps the request and, when the model is to answer it (take),
// takes the script's next step.
func (s *Server) record(r *http.Request, body []byte, take bool) (step Step, scripted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw = append(s.raw, body)
	s.headers = append(s.headers, r.Header.Clone())
	if take && len(s.script) > 0 {
		step, s.script = s.script[0], s.script[1:]
		return step, true
	}
	return Step{}, false
}

// delay sleeps for a step's delay; false when the request or the server
// ended first.
func (s *Server) delay(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-s.done:
		return false
	}
}

// answer writes a step: an error, a raw body, a stream or a completion.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, req openai.ChatCompletionRequest, size int, step Step, usage bool) {
	switch {
	case step.Status >= 400:
		writeError(w, step.Status, step.Header, step.Body)
	case step.Raw != "":
		status := step.Status
		if status == 0 {
			status = http.StatusOK
		}
		w.Header().Set("Content-Type", "application/json")
		// A scripted Content-Type wins: raw server-sent events, say.
		copyHeaderOver(w.Header(), step.Header)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, step.Raw)
	case req.Stream && !s.noStream:
		s.stream(w, r, step, s.chunks(s.completion(req, size, step), usage))
	default:
		copyHeader(w.Header(), step.Header)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.completion(req, size, step))
	}
}
