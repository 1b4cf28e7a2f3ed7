package sessions

import (
	"encoding/json"
	"errors"
)

// Peeked is what a turn needs to know of a stored message without decoding
// it: its role and kind, and the fields it passes on in their stored
// encoding (JSON tokens, copied into a request as they are). Every field
// points into the entry Peek was given.
type Peeked struct {
	Role string // "user", "assistant", "tool", "system" or another role as stored
	Kind string // KindInjection, KindSummary or ""
	// Content is the JSON string token of the content, nil when absent.
	Content json.RawMessage
	// ToolCallID is the JSON string token of a tool result's call id.
	ToolCallID json.RawMessage
	// ToolCalls is the stored array of an assistant's calls, nil when absent.
	ToolCalls json.RawMessage
	// Attachments is the stored array of a user message's attachment
	// references, nil when absent.
	Attachments json.RawMessage
	// ReasoningContent and ReasoningModel are the JSON string tokens of
	// an assistant message's reasoning and the model that wrote it, nil
	// when absent.
	ReasoningContent, ReasoningModel json.RawMessage
}

// HasContent reports a non-empty content.
func (p Peeked) HasContent() bool { return len(p.Content) > 2 }

// HasCallID reports a non-empty tool call id.
func (p Peeked) HasCallID() bool { return len(p.ToolCallID) > 2 }

// ErrNotAMessage is Peek's answer for an entry that is not a JSON object of
// the Message shape.
var ErrNotAMessage = errors.New("sessions: history entry is not a message")

// Peek reads the top-level fields of one encoded Message. It allocates
// nothing for the roles and kinds Parley writes.
func Peek(entry json.RawMessage) (Peeked, error) {
	var p Peeked
	err := eachField(entry, func(key, value []byte) bool {
		switch string(key) {
		case `"role"`:
			p.Role = stringToken(value, roles)
		case `"kind"`:
			p.Kind = stringToken(value, kinds)
		case `"content"`:
			if value[0] == '"' {
				p.Content = value
			}
		case `"tool_call_id"`:
			if value[0] == '"' {
				p.ToolCallID = value
			}
		case `"tool_calls"`:
			if value[0] == '[' {
				p.ToolCalls = value
			}
		case `"attachments"`:
			if value[0] == '[' {
				p.Attachments = value
			}
		case `"reasoning_content"`:
			if value[0] == '"' {
				p.ReasoningContent = value
			}
		case `"reasoning_model"`:
			if value[0] == '"' {
				p.ReasoningModel = value
			}
		}
		return true
	})
	if err != nil || p.Role == "" {
		return Peeked{}, ErrNotAMessage
	}
	return p, nil
}

// PeekedCall is one stored tool call, as JSON string tokens.
type PeekedCall struct {
	ID, Name, Arguments json.RawMessage
}

// NextCall returns the next tool call of the stored array calls (a
// Peeked.ToolCalls) and what follows it; ok is false at the end or on a
// malformed array. Start with rest = calls.
func NextCall(rest json.RawMessage) (c PeekedCall, after json.RawMessage, ok bool) {
	i := skipSpace(rest, 0)
	if i < len(rest) && (rest[i] == '[' || rest[i] == ',') {
		i = skipSpace(rest, i+1)
	}
	if i >= len(rest) || rest[i] != '{' {
		return PeekedCall{}, nil, false
	}
	end, ok := scanValue(rest, i)
	if !ok {
		return PeekedCall{}, nil, false
	}
	err := eachField(rest[i:end], func(key, value []byte) bool {
		if value[0] != '"' {
			return true
		}
		switch string(key) {
		case `"id"`:
			c.ID = value
		case `"name"`:
			c.Name = value
		case `"arguments"`:
			c.Arguments = value
		}
		return true
	})
	if err != nil {
		return PeekedCall{}, nil, false
	}
	return c, rest[end:], true
}

// Interned values of the fields Peek decodes, by their JSON token.
var (
	roles = map[string]string{`"user"`: "user", `"assistant"`: "assistant", `"tool"`: "tool", `"system"`: "system"}
	kinds = map[string]string{`"injection"`: KindInjection, `"summary"`: KindSummary, `""`: ""}
)

// stringToken returns a JSON string token's value: the interned string
// when known (no allocation), else the decoded value, "" if not a string.
func stringToken(tok []byte, known map[string]string) string {
	if v, ok := known[string(tok)]; ok { // no allocation: the compiler looks up without copying
		return v
	}
	var s string
	if tok[0] != '"' || json.Unmarshal(tok, &s) != nil {
		return ""
	}
	return s
}

// errSyntax is a malformed JSON value in a stored message.
var errSyntax = errors.New("sessions: malformed JSON")

// eachField calls f with the key token and the value span of every member
// of the JSON object obj, until f returns false.
func eachField(obj []byte, f func(key, value []byte) bool) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errSyntax
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return errSyntax
		}
		keyEnd, ok := scanString(obj, i)
		if !ok {
			return errSyntax
		}
		key := obj[i:keyEnd]
		i = skipSpace(obj, keyEnd)
		if i >= len(obj) || obj[i] != ':' {
			return errSyntax
		}
		i = skipSpace(obj, i+1)
		valEnd, ok := scanValue(obj, i)
		if !ok {
			return errSyntax
		}
		if !f(key, obj[i:valEnd]) {
			return nil
		}
		i = skipSpace(obj, valEnd)
		switch {
		case i < len(obj) && obj[i] == ',':
			i = skipSpace(obj, i+1)
		case i < len(obj) && obj[i] == '}':
			return nil
		default:
			return errSyntax
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index after the string token starting at b[i].
func scanString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// scanValue returns the index after the JSON value starting at b[i]. It
// checks the nesting and the strings, not every detail of the grammar:
// the entries it reads were written by encoding/json.
func scanValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return scanString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, ok := scanString(b, i)
				if !ok {
					return 0, false
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	}
	// A number or a literal runs to the next delimiter.
	start := i
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i, i > start
		}
	}
	return i, i > start
}
