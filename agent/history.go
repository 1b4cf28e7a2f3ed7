package agent

import (
	"github.com/parleyhq/parley/sessions"
	openai "github.com/sashabaranov/go-openai"
)

// Sanitize returns the part of a stored history that can be sent to the
// model without the API rejecting it:
//
//   - leading messages before the first user message (or compaction
//     summary) are dropped, because a history trimmed to its length cap may
//     start in the middle of a turn;
//   - a tool message is kept only directly after the assistant message that
//     called it (possibly after sibling results), and an assistant's tool
//     call is kept only when its result is there; an assistant message left
//     with neither calls nor text is dropped;
//   - messages with unknown roles, and messages without content that need
//     it, are dropped.
//
// h is not modified; the result is a new slice.
func Sanitize(h []sessions.Message) []sessions.Message {
	start := len(h)
	for i, m := range h {
		if m.Role == openai.ChatMessageRoleUser || m.Kind == sessions.KindSummary {
			start = i
			break
		}
	}
	h = h[start:]
	out := make([]sessions.Message, 0, len(h))
	for i := 0; i < len(h); i++ {
		m := h[i]
		if m.Kind == sessions.KindInjection || m.Kind == sessions.KindSummary {
			// Sent as user messages whatever their stored role.
			if m.Content != "" {
				m.ToolCalls, m.ToolCallID = nil, ""
				out = append(out, m)
			}
			continue
		}
		switch m.Role {
		case openai.ChatMessageRoleUser, openai.ChatMessageRoleSystem:
			if m.Content != "" {
				m.ToolCalls, m.ToolCallID = nil, ""
				out = append(out, m)
			}
		case openai.ChatMessageRoleAssistant:
			if len(m.ToolCalls) == 0 {
				if m.Content != "" {
					out = append(out, m)
				}
				continue
			}
			// The results of this call batch are the tool messages that
			// follow it directly.
			j := i + 1
			for j < len(h) && h[j].Role == openai.ChatMessageRoleTool {
				j++
			}
			results := h[i+1 : j]
			i = j - 1

			answered := make(map[string]bool, len(results))
			for _, r := range results {
				if r.ToolCallID != "" && r.Content != "" {
					answered[r.ToolCallID] = true
				}
			}
			calls := make([]sessions.ToolCall, 0, len(m.ToolCalls))
			called := make(map[string]bool, len(m.ToolCalls))
			for _, c := range m.ToolCalls {
				if answered[c.ID] && !called[c.ID] {
					calls = append(calls, c)
					called[c.ID] = true
				}
			}
			if len(calls) == 0 {
				if m.Content != "" {
					m.ToolCalls = nil
					out = append(out, m)
				}
				continue
			}
			m.ToolCalls = calls
			out = append(out, m)
			for _, r := range results {
				if called[r.ToolCallID] && r.Content != "" {
					out = append(out, r)
					delete(called, r.ToolCallID) // one result per call
				}
			}
		default:
			// Orphan tool messages (not directly after their call) and
			// unknown roles.
		}
	}
	return out
}

// toOpenAI converts one history message to the request format. Messages
// Parley wrote itself (injections, summaries) go as user messages whatever
// their stored role, and a tool message's Name is not sent, since the API
// does not define it there.
func toOpenAI(m sessions.Message) openai.ChatCompletionMessage {
	if m.Kind == sessions.KindInjection || m.Kind == sessions.KindSummary {
		return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: m.Content}
	}
	out := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
	if m.Role == openai.ChatMessageRoleAssistant && len(m.ToolCalls) > 0 {
		out.ToolCalls = make([]openai.ToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			out.ToolCalls[i] = openai.ToolCall{
				ID:       c.ID,
				Type:     openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: c.Name, Arguments: c.Arguments},
			}
		}
	}
	return out
}
