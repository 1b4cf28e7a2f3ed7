package openaitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// A request with "stream": true is answered as the API streams: server-sent
// events, one chat.completion.chunk per "data:" line, the role first, then
// the text in pieces, then each tool call (id, type and name in its first
// chunk, the arguments in pieces), a chunk with the finish_reason, a last
// chunk with the usage when stream_options.include_usage asked for it, and
// "data: [DONE]". The options below make a server that does not stream,
// refuses to, or streams slowly or in small pieces.

// WithoutStreaming makes the server ignore "stream" and answer every
// request with one JSON completion, as some proxies and local servers do.
func WithoutStreaming() Option { return func(s *Server) { s.noStream = true } }

// RefusingStreaming makes the server answer 400 to every request that asks
// to stream, as servers that do not know the parameter do. Such a refusal
// consumes no scripted step.
func RefusingStreaming() Option { return func(s *Server) { s.refuseStream = true } }

// WithChunkDelay makes the server wait d before each chunk after the first,
// like a model writing slowly. See also SetChunkDelay.
func WithChunkDelay(d time.Duration) Option { return func(s *Server) { s.chunkDelay = d } }

// WithChunkRunes sets how many characters of text one chunk carries
// (default 8).
func WithChunkRunes(n int) Option { return func(s *Server) { s.chunkRunes = n } }

// WithArgumentChunks sets how many bytes of a tool call's arguments one
// chunk carries (default 16), so that arguments arrive split as the real
// API splits them.
func WithArgumentChunks(n int) Option { return func(s *Server) { s.argBytes = n } }

// WithInterleavedCalls makes the argument chunks of an answer's tool calls
// alternate between the calls (index 0, 1, 0, 1, …) instead of following
// one another, which a client must assemble by index.
func WithInterleavedCalls() Option { return func(s *Server) { s.interleave = true } }

// SetChunkDelay sets the wait between chunks from now on.
func (s *Server) SetChunkDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chunkDelay = d
}

// CutAfter returns a copy of s whose stream breaks off (the connection is
// dropped without an end) after n chunks. It has no effect on an answer
// sent whole.
func (s Step) CutAfter(n int) Step { s.cut = n; return s }

// wireChunk is one chat.completion.chunk, field for field as the API
// sends it (nulls included).
type wireChunk struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	SystemFingerprint *string           `json:"system_fingerprint"`
	Choices           []wireChunkChoice `json:"choices"`
	Usage             *wireUsage        `json:"usage,omitempty"`
}

type wireChunkChoice struct {
	Index        int       `json:"index"`
	Delta        wireDelta `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type wireDelta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	Refusal   *string         `json:"refusal,omitempty"`
	ToolCalls []wireCallDelta `json:"tool_calls,omitempty"`
}

type wireCallDelta struct {
	Index    int               `json:"index"`
	ID       string            `json:"id,omitempty"`
	Type     string            `json:"type,omitempty"`
	Function wireFunctionDelta `json:"function"`
}

type wireFunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// chunks splits a completion into the chunks the API would stream for it.
func (s *Server) chunks(resp wireResponse, includeUsage bool) []wireChunk {
	s.mu.Lock()
	runes, argBytes, interleave := s.chunkRunes, s.argBytes, s.interleave
	s.mu.Unlock()
	if runes <= 0 {
		runes = 8
	}
	if argBytes <= 0 {
		argBytes = 16
	}
	choice := resp.Choices[0]
	base := wireChunk{ID: resp.ID, Object: "chat.completion.chunk", Created: resp.Created, Model: resp.Model}
	one := func(d wireDelta, finish *string) wireChunk {
		c := base
		c.Choices = []wireChunkChoice{{Delta: d, FinishReason: finish}}
		return c
	}
	empty := ""
	out := []wireChunk{one(wireDelta{Role: openai.ChatMessageRoleAssistant, Content: &empty}, nil)}
	if choice.Message.Content != nil {
		for _, piece := range splitRunes(*choice.Message.Content, runes) {
			out = append(out, one(wireDelta{Content: &piece}, nil))
		}
	}
	// Each call opens with its id, type and name; its arguments follow in
	// pieces, call after call or alternating between calls.
	var pieces [][]wireCallDelta
	for i, c := range choice.Message.ToolCalls {
		var p []wireCallDelta
		p = append(p, wireCallDelta{Index: i, ID: c.ID, Type: c.Type, Function: wireFunctionDelta{Name: c.Function.Name}})
		for _, a := range splitBytes(c.Function.Arguments, argBytes) {
			p = append(p, wireCallDelta{Index: i, Function: wireFunctionDelta{Arguments: a}})
		}
		pieces = append(pieces, p)
	}
	if interleave {
		for k := 0; ; k++ {
			sent := false
			for _, p := range pieces {
				if k < len(p) {
					out = append(out, one(wireDelta{ToolCalls: []wireCallDelta{p[k]}}, nil))
					sent = true
				}
			}
			if !sent {
				break
			}
		}
	} else {
		for _, p := range pieces {
			for _, d := range p {
				out = append(out, one(wireDelta{ToolCalls: []wireCallDelta{d}}, nil))
			}
		}
	}
	finish := choice.FinishReason
	out = append(out, one(wireDelta{}, &finish))
	if includeUsage {
		u := resp.Usage
		c := base
		c.Choices = []wireChunkChoice{}
		c.Usage = &u
		out = append(out, c)
	}
	return out
}

// stream writes chunks as server-sent events, pacing them and cutting the
// connection where step says. It returns early when the client goes away
// or the server closes.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, step Step, chunks []wireChunk) {
	copyHeader(w.Header(), step.Header)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	for i, c := range chunks {
		if step.cut > 0 && i == step.cut {
			// Dropping the connection mid-body: the client sees the stream
			// end without [DONE], as when a proxy or the model dies.
			panic(http.ErrAbortHandler)
		}
		if i > 0 {
			s.mu.Lock()
			d := s.chunkDelay
			s.mu.Unlock()
			if d > 0 && !s.wait(r, d) {
				return
			}
		}
		b, _ := json.Marshal(c)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// wait waits d, or less when the client gives up or the server closes; it
// reports whether the wait ran its course.
func (s *Server) wait(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-s.done:
	}
	return false
}

// splitRunes cuts s into pieces of n characters.
func splitRunes(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i, k := 0, 0
		for i < len(s) && k < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			k++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// splitBytes cuts s into pieces of about n bytes, anywhere but inside a
// character (each piece is a JSON string of its own, so it stays UTF-8).
func splitBytes(s string, n int) []string {
	var out []string
	for len(s) > n {
		i := n
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
