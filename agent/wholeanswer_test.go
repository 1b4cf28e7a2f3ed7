package agent

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// parleyReads is what Parley reads of a response: the choices' index,
// message (role, content, refusal, tool calls) and finish reason, and the
// usage.
// Content given as parts, which go-openai keeps in MultiContent, is read
// as its text parts joined, as decodeAnswer reads it.
func parleyReads(resp openai.ChatCompletionResponse) openai.ChatCompletionResponse {
	out := openai.ChatCompletionResponse{Usage: resp.Usage}
	for _, c := range resp.Choices {
		text := c.Message.Content
		for _, p := range c.Message.MultiContent {
			if p.Type == "text" || p.Type == "output_text" || p.Type == "" {
				text += p.Text
			}
		}
		out.Choices = append(out.Choices, openai.ChatCompletionChoice{Index: c.Index, FinishReason: c.FinishReason,
			Message: openai.ChatCompletionMessage{Role: c.Message.Role, Content: text, Refusal: c.Message.Refusal, ToolCalls: c.Message.ToolCalls}})
	}
	return out
}

// serverFailed reports the one answer decodeAnswer reads as a failure
// where go-openai reads an empty response: an error object in place of
// the choices, the server's failure with its message, retried as the
// empty response would be.
func serverFailed(lean error, full openai.ChatCompletionResponse) bool {
	var se *streamError
	return errors.As(lean, &se) && len(full.Choices) == 0 && retryable(lean) == retryable(errNoChoices)
}

// TestLeanDecodeAgreesWithGoOpenAI: decodeAnswer reads every answer as
// go-openai's response type does, as far as Parley looks, and fails where
// that fails.
func TestLeanDecodeAgreesWithGoOpenAI(t *testing.T) {
	tests := []struct {
		name, body string
		fails      bool
	}{
		{name: "text", body: `{"id":"chatcmpl-1","object":"chat.completion","created":1733000000,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"Roll back from the deploy dashboard.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1203,"completion_tokens":9,"total_tokens":1212,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_0aa8d3e20b"}` + "\n"},
		{name: "tool calls", body: `{"id":"chatcmpl-2","object":"chat.completion","created":1733000001,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"clock","arguments":"{\"tz\":\"UTC\"}"}},{"id":"call_b","type":"function","function":{"name":"web_fetch","arguments":"{\"url\":\"https://example.com/\u00e9\"}"}}],"refusal":null},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":80,"completion_tokens":40,"total_tokens":120}}`},
		{name: "tool call with an index", body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"clock","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`},
		{name: "cut at the token limit", body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"The first half of a long ans"},"finish_reason":"length"}],"usage":{"prompt_tokens":10,"completion_tokens":4096,"total_tokens":4106}}`},
		{name: "refusal", body: `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`},
		{name: "two choices", body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"one"},"finish_reason":"stop"},{"index":1,"message":{"role":"assistant","content":"two"},"finish_reason":"stop"}]}`},
		{name: "no choices", body: `{"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":0,"total_tokens":3}}`},
		{name: "an error object with a 200", body: `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`},
		{name: "content as an array of parts", body: `{"choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"parts"}]},"finish_reason":"stop"}]}`},
		{name: "extra data after the answer", body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]} trailing`},
		{name: "usage of the wrong type", body: `{"choices":[],"usage":{"prompt_tokens":"many"}}`, fails: true},
		{name: "cut short", body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"hal`, fails: true},
		{name: "not JSON", body: `<html>502 Bad Gateway</html>`, fails: true},
		{name: "empty", body: ``, fails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var full openai.ChatCompletionResponse
			fullErr := json.NewDecoder(strings.NewReader(tt.body)).Decode(&full)
			lean, err := decodeAnswer(strings.NewReader(tt.body))
			if fullErr == nil && serverFailed(err, full) {
				return
			}
			if (err != nil) != tt.fails || (fullErr != nil) != tt.fails {
				t.Fatalf("decodeAnswer: %v, go-openai: %v; want failure %v", err, fullErr, tt.fails)
			}
			if err != nil {
				if retryable(err) != retryable(fullErr) {
					t.Fatalf("decodeAnswer: %v (retryable %v); go-openai: %v (retryable %v)", err, retryable(err), fullErr, retryable(fullErr))
				}
				return
			}
			if got, want := parleyReads(lean), parleyReads(full); !reflect.DeepEqual(got, want) {
				t.Fatalf("decodeAnswer read\n%+v\ngo-openai read\n%+v", got, want)
			}
		})
	}
}

// TestLeanDecodeKeepsTheReadError: a body that fails to read (here: past
// maxResponseBytes) fails with that error, not as a malformed answer.
func TestLeanDecodeKeepsTheReadError(t *testing.T) {
	body := `{"choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("x", 100) + `"}}]}`
	_, err := decodeAnswer(&limitedReader{r: strings.NewReader(body), left: 50})
	if !errors.Is(err, errResponseTooLarge) {
		t.Fatalf("decodeAnswer = %v; want %v", err, errResponseTooLarge)
	}
}
