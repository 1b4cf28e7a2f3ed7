package agent

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"

	"github.com/parleyhq/parley/internal/jsonstring"
	"github.com/parleyhq/parley/sessions"
	openai "github.com/sashabaranov/go-openai"
)

// The request body of a turn is written by hand, field by field, into a
// pooled buffer: the stored history goes in as the JSON it is stored as
// (its content strings copied, never decoded and re-encoded), and the
// messages of the turn are encoded as they are written. The shape is the
// one go-openai's request types marshal to, which the tests check by
// decoding the bodies with them.

// bodyPool recycles request buffers: a turn's body is as large as its
// history, and allocating it anew for every request would make the
// garbage grow with the history.
var bodyPool = sync.Pool{New: func() any { return new([]byte) }}

// requestWriter appends one chat completion request to buf.
type requestWriter struct {
	buf []byte
	n   int // messages written
	// images go with the turn's user message, history's with the stored
	// user messages at those entries; only to a model with vision, else
	// the turn's user message says they were left out.
	vision  bool
	images  []string
	history map[int][]string
	// reasoner is the key of the model the request goes to, as a string
	// and as a JSON string token: the reasoning an assistant message
	// keeps is sent back to that model only (see
	// sessions.Message.ReasoningContent); another may refuse the field.
	reasoner      string
	reasonerToken []byte
}

func (w *requestWriter) begin(model []byte) {
	w.buf = append(w.buf, `{"model":`...)
	w.buf = append(w.buf, model...)
	w.buf = append(w.buf, `,"messages":[`...)
}

// sep starts a message: a comma after the first.
func (w *requestWriter) sep() {
	if w.n > 0 {
		w.buf = append(w.buf, ',')
	}
	w.n++
}

// raw writes an encoded message as it is.
func (w *requestWriter) raw(msg []byte) {
	w.sep()
	w.buf = append(w.buf, msg...)
}

// stored writes one planned entry of the stored history in the wire
// format: the role the plan gives it, and the stored tokens of the fields
// it keeps.
func (w *requestWriter) stored(p sessions.Peeked, step planStep, calls []int) {
	w.sep()
	switch step.as {
	case sendAsUser:
		w.buf = append(w.buf, `{"role":"user","content":`...)
		w.buf = append(w.buf, p.Content...)
	case sendAsIs:
		w.buf = append(w.buf, `{"role":`...)
		w.buf = jsonstring.Append(w.buf, p.Role)
		w.buf = append(w.buf, `,"content":`...)
		if imgs := w.history[step.i]; w.vision && len(imgs) > 0 && p.Role == openai.ChatMessageRoleUser {
			w.buf = appendParts(w.buf, p.Content, imgs)
			break
		}
		w.buf = append(w.buf, p.Content...)
	case sendToolResult:
		w.buf = append(w.buf, `{"role":"tool","content":`...)
		w.buf = append(w.buf, p.Content...)
		w.buf = append(w.buf, `,"tool_call_id":`...)
		w.buf = append(w.buf, p.ToolCallID...)
	case sendCalls:
		w.buf = append(w.buf, `{"role":"assistant"`...)
		if p.HasContent() {
			w.buf = append(w.buf, `,"content":`...)
			w.buf = append(w.buf, p.Content...)
		}
		if len(p.ReasoningContent) > 2 && bytes.Equal(p.ReasoningModel, w.reasonerToken) {
			w.buf = append(w.buf, `,"reasoning_content":`...)
			w.buf = append(w.buf, p.ReasoningContent...)
		}
		w.buf = append(w.buf, `,"tool_calls":[`...)
		k, n := 0, 0
		for c, rest, ok := sessions.NextCall(p.ToolCalls); ok; c, rest, ok = sessions.NextCall(rest) {
			if k < len(calls) && calls[k] == n {
				if k > 0 {
					w.buf = append(w.buf, ',')
				}
				w.call(c.ID, c.Name, c.Arguments)
				k++
			}
			n++
		}
		w.buf = append(w.buf, ']')
	}
	w.buf = append(w.buf, '}')
}

// call writes one tool call from JSON string tokens.
func (w *requestWriter) call(id, name, args []byte) {
	w.buf = append(w.buf, `{"id":`...)
	w.buf = appendToken(w.buf, id)
	w.buf = append(w.buf, `,"type":"function","function":{"name":`...)
	w.buf = appendToken(w.buf, name)
	w.buf = append(w.buf, `,"arguments":`...)
	w.buf = appendToken(w.buf, args)
	w.buf = append(w.buf, `}}`...)
}

// message writes one message of this turn: injections and summaries as
// user messages, a tool message without its name (the API defines none),
// an assistant message with the reasoning that came with it, if any.
func (w *requestWriter) message(m *sessions.Message) {
	w.sep()
	if m.Kind == sessions.KindInjection || m.Kind == sessions.KindSummary {
		w.buf = append(w.buf, `{"role":"user","content":`...)
		w.buf = jsonstring.Append(w.buf, m.Content)
		w.buf = append(w.buf, '}')
		return
	}
	w.buf = append(w.buf, `{"role":`...)
	w.buf = jsonstring.Append(w.buf, m.Role)
	if len(w.images) > 0 && m.Role == openai.ChatMessageRoleUser && len(m.Attachments) > 0 {
		w.buf = append(w.buf, `,"content":`...)
		if w.vision {
			w.buf = appendParts(w.buf, jsonstring.Append(nil, m.Content), w.images)
		} else {
			w.buf = jsonstring.Append(w.buf, m.Content+strings.Repeat("\n"+NoVisionNote, len(w.images)))
		}
	} else if m.Content != "" {
		w.buf = append(w.buf, `,"content":`...)
		w.buf = jsonstring.Append(w.buf, m.Content)
	}
	if m.ReasoningContent != "" && m.ReasoningModel == w.reasoner && m.Role == openai.ChatMessageRoleAssistant {
		w.buf = append(w.buf, `,"reasoning_content":`...)
		w.buf = jsonstring.Append(w.buf, m.ReasoningContent)
	}
	if m.Role == openai.ChatMessageRoleAssistant && len(m.ToolCalls) > 0 {
		w.buf = append(w.buf, `,"tool_calls":[`...)
		for i, c := range m.ToolCalls {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.buf = append(w.buf, `{"id":`...)
			w.buf = jsonstring.Append(w.buf, c.ID)
			w.buf = append(w.buf, `,"type":"function","function":{"name":`...)
			w.buf = jsonstring.Append(w.buf, c.Name)
			w.buf = append(w.buf, `,"arguments":`...)
			w.buf = jsonstring.Append(w.buf, c.Arguments)
			w.buf = append(w.buf, `}}`...)
		}
		w.buf = append(w.buf, ']')
	}
	if m.ToolCallID != "" {
		w.buf = append(w.buf, `,"tool_call_id":`...)
		w.buf = jsonstring.Append(w.buf, m.ToolCallID)
	}
	w.buf = append(w.buf, '}')
}

// end closes the messages and writes the rest of the request.
func (w *requestWriter) end(maxTokens int, tools [][]byte) {
	w.buf = append(w.buf, ']')
	if maxTokens > 0 {
		w.buf = append(w.buf, `,"max_completion_tokens":`...)
		w.buf = appendInt(w.buf, maxTokens)
	}
	if len(tools) > 0 {
		w.buf = append(w.buf, `,"tools":[`...)
		for i, t := range tools {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.buf = append(w.buf, t...)
		}
		w.buf = append(w.buf, ']')
	}
	w.buf = append(w.buf, '}')
}

// appendToken appends a stored JSON string token, or "" when absent.
func appendToken(buf, tok []byte) []byte {
	if len(tok) == 0 {
		return append(buf, `""`...)
	}
	return append(buf, tok...)
}

func appendInt(buf []byte, n int) []byte {
	if n == 0 {
		return append(buf, '0')
	}
	var d [20]byte
	i := len(d)
	for ; n > 0; n /= 10 {
		i--
		d[i] = byte('0' + n%10)
	}
	return append(buf, d[i:]...)
}

// encodedTool is a tool's entry of the tools list, encoded once.
type encodedTool struct {
	description string
	params      json.RawMessage
	json        []byte
}
