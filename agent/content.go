package agent

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Servers send a message's content in three shapes: a string (the OpenAI
// API and most imitators), null (an answer that only calls tools or that a
// filter stopped), or an array of parts, as Mistral's reasoning models do
// in whole answers and deltas alike:
//
//	"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "…"}]},
//	            {"type": "text", "text": "The answer."}]
//
// The text parts are the answer. Reasoning parts ("thinking", "reasoning")
// are kept apart from it, as a separate reasoning_content field is: the
// user never sees a model's reasoning as its answer. Other parts (images,
// references) carry no text of the answer and are skipped.

// content is a message's content, read from any of those shapes.
type content struct {
	text      string
	reasoning string
}

// UnmarshalJSON reads a string, null or an array of parts.
func (c *content) UnmarshalJSON(b []byte) error {
	*c = content{}
	switch {
	case len(b) == 0 || b[0] == 'n': // null
		return nil
	case b[0] == '"':
		c.text = decodeString(b)
		return nil
	case b[0] != '[':
		// A number or an object is no content Parley knows: the
		// answer is read without it rather than refused.
		return nil
	}
	var parts []contentPart
	if err := json.Unmarshal(b, &parts); err != nil {
		return err
	}
	var text, reasoning []byte
	for _, p := range parts {
		switch p.Type {
		case "text", "output_text", "":
			text = append(text, p.Text...)
		case "thinking", "reasoning", "reasoning_content":
			reasoning = append(reasoning, p.Thinking.text...)
			reasoning = append(reasoning, p.Reasoning.text...)
			reasoning = append(reasoning, p.Text...)
		}
	}
	c.text, c.reasoning = string(text), string(reasoning)
	return nil
}

// contentPart is one part of an array content. A thinking part's text is
// a string or, in Mistral's shape, an array of text parts itself.
type contentPart struct {
	Type      string     `json:"type"`
	Text      string     `json:"text"`
	Thinking  nestedText `json:"thinking"`
	Reasoning nestedText `json:"reasoning"`
}

// nestedText is a string, or an array of parts whose texts are joined.
type nestedText struct{ text string }

func (n *nestedText) UnmarshalJSON(b []byte) error {
	var c content
	if err := c.UnmarshalJSON(b); err != nil {
		return err
	}
	// Inside a thinking part every text is reasoning.
	n.text = c.text + c.reasoning
	return nil
}

// decodeString decodes a JSON string token the decoder has already
// checked. A token of plain ASCII without escapes, what nearly every
// delta of a stream is, is copied as it is instead of decoded again.
func decodeString(b []byte) string {
	inner := b[1 : len(b)-1]
	if bytes.IndexByte(inner, '\\') < 0 && ascii(inner) {
		return string(inner)
	}
	var s string
	_ = json.Unmarshal(b, &s) // a checked token: cannot fail
	return s
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
