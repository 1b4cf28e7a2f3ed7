package openaitest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Constant starts a server that answers every chat completion request with
// the same assistant text, without reading or recording the request, and
// registers its shutdown with t.Cleanup. Benchmarks use it when the
// allocations they count must be the caller's alone: a Server decodes
// every request, which costs more the longer the history it carries.
func Constant(t testing.TB, text string) *httptest.Server {
	content, _ := json.Marshal(text)
	body := []byte(`{"id":"constant","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":` +
		string(content) + `},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// ConstantStream is Constant for streaming requests: every request is
// answered with the same event stream, text cut into pieces of about
// pieceBytes bytes (at character boundaries) and its usage in the last
// chunk, rendered once.
func ConstantStream(t testing.TB, text string, pieceBytes int) *httptest.Server {
	var body []byte
	chunk := func(delta, finish string) {
		body = append(body, `data: {"id":"constant","object":"chat.completion.chunk","choices":[{"index":0,"delta":`...)
		body = append(body, delta...)
		body = append(body, `,"finish_reason":`...)
		body = append(body, finish...)
		body = append(body, "}]}\n\n"...)
	}
	chunk(`{"role":"assistant","content":""}`, "null")
	for _, piece := range splitBytes(text, pieceBytes) {
		content, _ := json.Marshal(piece)
		chunk(`{"content":`+string(content)+`}`, "null")
	}
	chunk(`{}`, `"stop"`)
	body = append(body, `data: {"id":"constant","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}}`+"\n\ndata: [DONE]\n\n"...)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}
