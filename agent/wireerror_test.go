package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

const contextTooLongBody = `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 8227 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`

// TestContextTooLongCompactsOnce: a request the model refuses as longer
// than its context is not retried as it is; the turn compacts the history
// once (TurnRequest.Compact) and asks again with the compacted one, and
// when that cannot help the user is told to /compact or /reset.
func TestContextTooLongCompactsOnce(t *testing.T) {
	long := stored(t,
		sessions.Message{Role: "user", Content: "an old question"},
		sessions.Message{Role: "assistant", Content: "an old answer"})
	short := stored(t, sessions.Message{Role: "user", Content: "[Summary] the old exchange", Kind: sessions.KindSummary})
	tests := []struct {
		name         string
		steps        []openaitest.Step
		compact      bool // a Compact is given
		compacted    bool // and it compacts
		wantReply    string
		wantCompacts int
		wantRequests int
	}{
		{"compacted, then answered", []openaitest.Step{openaitest.Error(400).WithBody(contextTooLongBody), openaitest.Text("answered")}, true, true, "answered", 1, 2},
		{"still too long after compacting", []openaitest.Step{openaitest.Error(400).WithBody(contextTooLongBody), openaitest.Error(400).WithBody(contextTooLongBody)}, true, true, ContextTooLongReply, 1, 2},
		{"nothing to compact", []openaitest.Step{openaitest.Error(400).WithBody(contextTooLongBody)}, true, false, ContextTooLongReply, 1, 1},
		{"no compaction offered", []openaitest.Step{openaitest.Error(400).WithBody(contextTooLongBody)}, false, false, ContextTooLongReply, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{MaxRetries: 3}, nil)
			h.srv.Script(tt.steps...)
			compacts := 0
			req := TurnRequest{UserText: "and now?", History: long}
			if tt.compact {
				req.Compact = func(context.Context) (sessions.History, bool) {
					compacts++
					if !tt.compacted {
						return long, false
					}
					return short, true
				}
			}
			res := h.run(t, req)
			if res.Reply != tt.wantReply || compacts != tt.wantCompacts || h.srv.RequestCount() != tt.wantRequests {
				t.Fatalf("reply %q, %d compactions, %d requests; want %q, %d, %d", res.Reply, compacts, h.srv.RequestCount(), tt.wantReply, tt.wantCompacts, tt.wantRequests)
			}
			if tt.wantReply == ContextTooLongReply && (res.Failure != ContextTooLong || len(res.Messages) != 1) {
				t.Errorf("failure %v with %d messages kept; want context_too_long, the user's message only", res.Failure, len(res.Messages))
			}
			if tt.wantRequests == 2 && tt.compacted {
				second := h.srv.Requests()[1]
				if got := second.Messages[1].Content; got != "[Summary] the old exchange" {
					t.Errorf("the request after compacting sent %q first, want the summary", got)
				}
			}
		})
	}
}

// TestErrorsInsideStreams: every way a server reports a failure after its
// 200 is read as the failure it is, with the server's message in the log:
// an "event: error", an "error:" field, an error object in a data line or
// in place of a whole answer's choices. Failures that can never succeed
// are sent once; a server's own failure is retried.
func TestErrorsInsideStreams(t *testing.T) {
	tests := []struct {
		name         string
		body         string
		contentType  string
		want         Failure
		wantRequests int // with MaxRetries 2
		wantLog      string
	}{
		{"event error, overloaded", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", "text/event-stream", ModelDown, 3, "Overloaded"},
		{"event error, plain text", "event: error\ndata: upstream connect error\n\n", "text/event-stream", ModelDown, 3, "upstream connect error"},
		{"event error, invalid request", "event: error\ndata: {\"error\":{\"message\":\"messages[0].content must be a string\",\"type\":\"invalid_request_error\",\"code\":\"upstream_bad_request\"}}\n\ndata: [DONE]\n\n", "text/event-stream", Misconfigured, 1, "messages[0].content must be a string"},
		{"error field, a string", "error: \"quota exceeded\"\n\n", "text/event-stream", ModelDown, 3, "quota exceeded"},
		{"data error, a string", "data: {\"error\": \"thinking_budget is not supported with speculative decoding in the server.\"}\n\n", "text/event-stream", ModelDown, 3, "thinking_budget is not supported"},
		{"data error, code 400", "data: {\"error\":{\"code\":400,\"message\":\"Invalid tool schema\"}}\n\n", "text/event-stream", Misconfigured, 1, "Invalid tool schema"},
		{"data error after text, content policy", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Sure\"}}]}\n\ndata: {\"error\":{\"code\":\"content_policy_violation\",\"message\":\"Your request was rejected\"}}\n\n", "text/event-stream", Filtered, 1, "Your request was rejected"},
		{"whole answer error object, rate limited", `{"error":{"code":429,"message":"Rate limit reached"}}`, "application/json", ModelDown, 3, "Rate limit reached"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := openaitest.New(t)
			var steps []openaitest.Step
			for range 3 {
				steps = append(steps, openaitest.Step{Raw: tt.body}.WithHeader("Content-Type", tt.contentType))
			}
			srv.Script(steps...)
			var logs logBuffer
			a := New(Config{Model: "m", MaxRetries: 2, BackoffBase: time.Microsecond, BackoffMax: time.Microsecond},
				NewClient(srv.URL(), "sk-test-secret", nil), nil, metrics.New(), slog.New(slog.NewTextHandler(&logs, nil)))
			res, err := a.Run(context.Background(), TurnRequest{Channel: "console", UserText: "hi"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Failure != tt.want || srv.RequestCount() != tt.wantRequests {
				t.Errorf("failure %v after %d requests; want %v after %d", res.Failure, srv.RequestCount(), tt.want, tt.wantRequests)
			}
			if !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("the log does not hold the server's message %q:\n%s", tt.wantLog, logs.String())
			}
		})
	}
}

// TestServerErrorMessageBounded is the attacker's case: a server that
// answers with an error message of its own making, however large, gets at
// most maxErrorMessage bytes of it into the log, and no secret of the
// request (the API key) is ever part of what is logged.
func TestServerErrorMessageBounded(t *testing.T) {
	huge := strings.Repeat("A", 200<<10)
	for _, body := range []string{
		"event: error\ndata: " + huge + "\n\n",
		"data: {\"error\":{\"message\":\"" + huge + "\"}}\n\n",
		"error: " + huge + "\n\n",
	} {
		srv := openaitest.New(t)
		srv.Script(openaitest.Step{Raw: body}.WithHeader("Content-Type", "text/event-stream"))
		var logs logBuffer
		a := New(Config{Model: "m"}, NewClient(srv.URL(), "sk-test-secret", nil), nil, metrics.New(), slog.New(slog.NewTextHandler(&logs, nil)))
		res, err := a.Run(context.Background(), TurnRequest{Channel: "console", UserText: "hi"})
		if err != nil || !res.Failed {
			t.Fatalf("Run = %+v, %v; want a failed turn", res, err)
		}
		out := logs.String()
		if strings.Contains(out, strings.Repeat("A", maxErrorMessage+1)) {
			t.Errorf("the log holds more than %d bytes of the server's message", maxErrorMessage)
		}
		if strings.Contains(out, "sk-test-secret") {
			t.Error("the API key reached the log")
		}
	}
}

// TestAssembleToolCalls: streamed pieces go to their call by id first,
// then by index, and pieces without either continue the last call, as the
// servers of the corpus send them.
func TestAssembleToolCalls(t *testing.T) {
	idx := func(i int) *int { return &i }
	piece := func(index *int, id, name, args string) callDelta {
		d := callDelta{Index: index, ID: id}
		d.Function.Name, d.Function.Arguments = name, args
		return d
	}
	tests := []struct {
		name   string
		pieces []callDelta
		want   []string // name(args) of each call, in order
	}{
		{"OpenAI: index on every piece", []callDelta{piece(idx(0), "a", "x", ""), piece(idx(0), "", "", `{"k":`), piece(idx(0), "", "", `1}`)}, []string{`x({"k":1})`}},
		{"interleaved indexes", []callDelta{piece(idx(0), "a", "x", ""), piece(idx(1), "b", "y", ""), piece(idx(1), "", "", `{}`), piece(idx(0), "", "", `{"k":2}`)}, []string{`x({"k":2})`, `y({})`}},
		{"shared index, new ids", []callDelta{piece(idx(0), "a", "x", `{"n":1}`), piece(idx(0), "b", "x", `{"n":2}`)}, []string{`x({"n":1})`, `x({"n":2})`}},
		{"first index 1, then 0", []callDelta{piece(idx(1), "a", "x", ""), piece(idx(0), "", "", `{"n":`), piece(idx(0), "", "", `3}`)}, []string{`x({"n":3})`}},
		{"no index, no id: the last call", []callDelta{piece(nil, "a", "x", `{"n":`), piece(nil, "", "", `4}`), piece(nil, "b", "y", `{}`)}, []string{`x({"n":4})`, `y({})`}},
		{"a new id per piece, one name", []callDelta{piece(idx(0), "a", "x", ""), piece(idx(0), "b", "", `{"n":`), piece(idx(0), "c", "", `5}`)}, []string{`x({"n":5})`}},
		{"the id after the name", []callDelta{piece(idx(0), "", "x", ""), piece(idx(0), "a", "x", `{}`)}, []string{`x({})`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a assembler
			for _, p := range tt.pieces {
				if err := a.addCall(p); err != nil {
					t.Fatal(err)
				}
			}
			a.chunks, a.finish = 1, "tool_calls"
			resp, err := a.response()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range resp.Choices[0].Message.ToolCalls {
				got = append(got, c.Function.Name+"("+c.Function.Arguments+")")
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("calls = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestContentShapes: content read as a string, null or parts; reasoning
// parts never part of the text.
func TestContentShapes(t *testing.T) {
	tests := []struct{ raw, text, reasoning string }{
		{`"plain"`, "plain", ""},
		{`"caf\u00e9 \"q\""`, `café "q"`, ""},
		{`null`, "", ""},
		{`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`, "ab", ""},
		{`[{"type":"thinking","thinking":[{"type":"text","text":"hmm"}]},{"type":"text","text":"yes"}]`, "yes", "hmm"},
		{`[{"type":"thinking","thinking":"plain thought"},{"type":"image_url","image_url":{"url":"x"}}]`, "", "plain thought"},
		{`[{"type":"reasoning","reasoning":"r"},{"type":"output_text","text":"o"}]`, "o", "r"},
		{`42`, "", ""},
	}
	for _, tt := range tests {
		var c content
		if err := json.Unmarshal([]byte(tt.raw), &c); err != nil {
			t.Fatalf("%s: %v", tt.raw, err)
		}
		if c.text != tt.text || c.reasoning != tt.reasoning {
			t.Errorf("%s read as text %q, reasoning %q; want %q, %q", tt.raw, c.text, c.reasoning, tt.text, tt.reasoning)
		}
	}
}

// TestReasoningSentBackOnlyToItsModel: the reasoning_content DeepSeek
// sends with tool calls goes back with them in the turn's next request
// and, stored with the calls, in every later turn's, as its thinking mode
// requires; only to the model that wrote it, and never as text.
func TestReasoningSentBackOnlyToItsModel(t *testing.T) {
	call := `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"","reasoning_content":"I need the clock.","tool_calls":[{"id":"c1","type":"function","function":{"name":"clock","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
	h := newHarness(t, Config{}, []Tool{textTool("clock", "noon")})
	h.srv.Script(openaitest.Malformed(call), openaitest.Text("it is noon"))
	res := h.run(t, TurnRequest{UserText: "time?"})
	if res.Reply != "it is noon" {
		t.Fatalf("reply %q", res.Reply)
	}
	const sent = `"reasoning_content":"I need the clock."`
	if raw := h.srv.RawRequests(); !bytes.Contains(raw[1], []byte(sent)) {
		t.Errorf("the request after the call does not carry the reasoning:\n%s", raw[1])
	}
	var kept *sessions.Message
	for i, m := range res.Messages {
		if strings.Contains(m.Content, "I need the clock") {
			t.Errorf("the reasoning became text in %+v", m)
		}
		if len(m.ToolCalls) > 0 {
			kept = &res.Messages[i]
		}
	}
	if kept == nil || kept.ReasoningContent != "I need the clock." || kept.ReasoningModel != "default" {
		t.Fatalf("the call message kept %+v; want its reasoning and model", kept)
	}

	// The next turn sends it again from the stored history, to this model.
	history := stored(t, res.Messages...)
	h.srv.Script(openaitest.Text("still noon"))
	h.run(t, TurnRequest{UserText: "and now?", History: history})
	raw := h.srv.RawRequests()
	if !bytes.Contains(raw[len(raw)-1], []byte(sent)) {
		t.Errorf("the next turn's request does not carry the stored reasoning:\n%s", raw[len(raw)-1])
	}

	// Another model is sent neither the stored nor the turn's reasoning.
	other := &endpoint{key: "other", keyToken: []byte(`"other"`), model: []byte(`"other"`)}
	body := h.agent.turnRequest(other, []byte(`{"role":"system","content":"s"}`), newPlan(history), []sessions.Message{*kept}, false, nil, turnMedia{})
	if bytes.Contains(*body, []byte("I need the clock")) {
		t.Errorf("another model was sent the reasoning: %s", *body)
	}
}

// TestContentFilterStopsTheAnswer: finish_reason content_filter tells the
// user that the provider's filter stopped the answer: in place of an
// empty one, or after the part written before it, streamed or whole.
func TestContentFilterStopsTheAnswer(t *testing.T) {
	for _, opts := range [][]openaitest.Option{nil, {openaitest.WithoutStreaming()}} {
		h := newHarness(t, Config{}, nil, opts...)
		h.srv.Script(openaitest.Step{Text: "The first part", FinishReason: "content_filter"})
		res := h.run(t, TurnRequest{UserText: "go on"})
		if res.Reply != "The first part"+FilteredNote || res.Failed {
			t.Errorf("reply %q (failed %v); want the part and the note", res.Reply, res.Failed)
		}
		if stored := res.Messages[len(res.Messages)-1].Content; stored != "The first part" {
			t.Errorf("stored %q; want the model's text without the note", stored)
		}
	}
	h := newHarness(t, Config{}, nil)
	h.srv.Script(openaitest.Malformed(`{"choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"content_filter"}]}`))
	if res := h.run(t, TurnRequest{UserText: "go on"}); res.Reply != FilteredReply {
		t.Errorf("reply %q; want FilteredReply", res.Reply)
	}
}
