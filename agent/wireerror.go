package agent

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// A model's failure is told by what it means, wherever the server put it:
// an HTTP status with an error object, an error object in the body of a
// 200 (whole, or in a data line of a stream: llama.cpp, OpenRouter), an
// SSE "error" event or "error:" field. Some failures can never succeed when
// the same request is sent again: a request refused as such (400,
// invalid_request_error), a context too long for the model, content a
// provider's policy refuses. Those are not retried; the rest (rate limits,
// 5xx, errors mid-answer the server gives no reason for) are.

// streamError is an error the server sent after its 200: in the answer's
// body or inside its stream. The server's message is kept for the log.
type streamError struct {
	status int    // an HTTP status the server gave as its code, or 0
	code   string // a code given as a string (context_length_exceeded)
	typ    string // the error's type (invalid_request_error)
	msg    string
}

func (e *streamError) Error() string {
	var b strings.Builder
	b.WriteString("agent: the model failed in its answer: ")
	b.WriteString(e.msg)
	if e.typ != "" || e.code != "" || e.status != 0 {
		b.WriteString(" (")
		sep := ""
		for _, s := range []string{e.typ, e.code} {
			if s != "" {
				b.WriteString(sep + s)
				sep = ", "
			}
		}
		if e.status != 0 {
			b.WriteString(sep + strconv.Itoa(e.status))
		}
		b.WriteString(")")
	}
	return b.String()
}

// maxErrorMessage bounds the server's message kept in an error: it goes
// to the log, and a server must not fill that.
const maxErrorMessage = 1 << 10

// wireError reads an error as servers write it: an object with a message
// (a string or a list), a type, a code that is a number or a string, or
// Google's status; or a bare string.
type wireError struct{ e *streamError }

func (w *wireError) UnmarshalJSON(b []byte) error {
	e := &streamError{}
	w.e = e
	if len(b) > 0 && b[0] == '"' {
		e.msg = truncateUTF8(decodeString(b), maxErrorMessage)
		return nil
	}
	if len(b) == 0 || b[0] != '{' {
		e.msg = truncateUTF8(string(b), maxErrorMessage)
		return nil
	}
	var o struct {
		Message json.RawMessage `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
		Status  json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	e.typ = o.Type
	e.msg = truncateUTF8(rawText(o.Message), maxErrorMessage)
	for _, v := range []json.RawMessage{o.Code, o.Status} {
		if n, err := strconv.Atoi(string(v)); err == nil && n >= 100 && n < 600 && e.status == 0 {
			e.status = n
		} else if t := rawText(v); t != "" && e.code == "" {
			e.code = t
		}
	}
	return nil
}

// rawText is a JSON value as text: a string decoded, anything else as
// written (null as nothing).
func rawText(v json.RawMessage) string {
	switch {
	case len(v) == 0 || string(v) == "null":
		return ""
	case v[0] == '"':
		return decodeString(v)
	}
	return string(v)
}

// eventError reads the data of an SSE "error" event: {"error": {...}},
// an error object itself, or plain text.
func eventError(data []byte) *streamError {
	var wrapped struct {
		Error *wireError `json:"error"`
	}
	if json.Unmarshal(data, &wrapped) == nil && wrapped.Error != nil && wrapped.Error.e != nil {
		return wrapped.Error.e
	}
	var w wireError
	if json.Unmarshal(data, &w) == nil && w.e != nil && w.e.msg != "" {
		return w.e
	}
	return &streamError{msg: truncateUTF8(strings.TrimSpace(string(data)), maxErrorMessage)}
}

// errorDetails is what a failure says of itself: its HTTP status (the
// response's, or the code an error inside the answer gave), code, type and
// message.
func errorDetails(err error) (status int, code, typ, msg string, ok bool) {
	var (
		apiErr    *openai.APIError
		reqErr    *openai.RequestError
		streamErr *streamError
	)
	switch {
	case errors.As(err, &streamErr):
		return streamErr.status, streamErr.code, streamErr.typ, streamErr.msg, true
	case errors.As(err, &apiErr):
		if s, isString := apiErr.Code.(string); isString {
			code = s
		}
		return apiErr.HTTPStatusCode, code, apiErr.Type, apiErr.Message, true
	case errors.As(err, &reqErr):
		return reqErr.HTTPStatusCode, "", "", string(reqErr.Body), true
	}
	return 0, "", "", "", false
}

// contextCodes are the codes and types servers give a request longer than
// the model's context.
var contextCodes = map[string]bool{
	"context_length_exceeded":       true, // OpenAI, Azure, vLLM, Groq, OpenRouter
	"exceed_context_size_error":     true, // llama.cpp
	"context_window_exceeded":       true,
	"model_context_window_exceeded": true,
	"string_above_max_length":       true,
}

// contextPhrases are what their messages say when no code tells it.
var contextPhrases = []string{
	"maximum context length", "context length", "context_length", "context window",
	"context size", "exceeds the available context", "prompt is too long",
	"input is too long", "reduce the length of the messages", "range of input length",
	"maximum input length", "too large for model with",
}

// contextTooLong reports a request refused because the conversation is
// longer than the model reads, whatever the status says (llama.cpp has
// answered it with a 500). A rate limit on tokens is not one.
func contextTooLong(err error) bool {
	status, code, typ, msg, ok := errorDetails(err)
	if !ok || status == http.StatusTooManyRequests {
		return false
	}
	if contextCodes[code] || contextCodes[typ] {
		return true
	}
	msg = strings.ToLower(msg)
	for _, p := range contextPhrases {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// policyCodes are the codes and types of content a provider's policy
// refuses.
var policyCodes = map[string]bool{
	"content_filter":           true, // Azure OpenAI, Moonshot
	"content_policy_violation": true, // OpenAI
	"DataInspectionFailed":     true, // DashScope
	"data_inspection_failed":   true, // DashScope, OpenAI-compatible mode
	"1301":                     true, // Zhipu GLM: unsafe or sensitive content
	"contentFilter":            true,
}

// refusedByPolicy reports content a provider's filter refused.
func refusedByPolicy(err error) bool {
	_, code, typ, _, ok := errorDetails(err)
	return ok && (policyCodes[code] || policyCodes[typ])
}

// neverSucceeds reports a failure that the same request sent again cannot
// fix, whatever its status says.
func neverSucceeds(err error) bool {
	if contextTooLong(err) || refusedByPolicy(err) {
		return true
	}
	var streamErr *streamError
	if !errors.As(err, &streamErr) {
		return false // a status says it (retryableStatus)
	}
	if streamErr.status != 0 {
		return !retryableStatus(streamErr.status)
	}
	return streamErr.typ == "invalid_request_error"
}
