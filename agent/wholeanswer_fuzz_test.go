package agent

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// FuzzDecodeAnswer: whatever a model (or a proxy in front of one) answers,
// the lean decode never reads it differently from go-openai's response
// type where that type reads it: the same choices, finish reasons, tool
// calls and usage. It may accept more (fields Parley does not read are not
// checked), never less; an error object where the choices should be is
// read as the server's failure (see serverFailed).
func FuzzDecodeAnswer(f *testing.F) {
	for _, seed := range []string{
		`{"choices":[{"index":0,"message":{"role":"assistant","content":"hi","refusal":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`,
		`{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"clock","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
		`{"choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"parts"}]},"finish_reason":"stop"}]}`,
		`{"choices":[{"message":{"Content":"case","ROLE":"assistant"}}]} trailing`,
		`{"error":{"message":"overloaded","type":"server_error"}}`,
		`{"choices":[{"index":0,"message":{"content":"\ud800"},"finish_reason":"length"}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var full openai.ChatCompletionResponse
		if json.NewDecoder(bytes.NewReader(body)).Decode(&full) != nil {
			return
		}
		lean, err := decodeAnswer(bytes.NewReader(body))
		if serverFailed(err, full) {
			return
		}
		if err != nil {
			t.Fatalf("go-openai reads %q, the lean decode fails: %v", body, err)
		}
		if got, want := parleyReads(lean), parleyReads(full); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q read as\n%+v\nwhere go-openai reads\n%+v", body, got, want)
		}
	})
}
