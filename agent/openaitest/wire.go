package openaitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// The wire types mirror OpenAI's JSON field for field (including the nulls
// it sends), rather than re-using go-openai's structs, so that the client's
// decoding is tested against what the real API returns.
type wireResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []wireChoice `json:"choices"`
	Usage             wireUsage    `json:"usage"`
	SystemFingerprint *string      `json:"system_fingerprint"`
}

type wireChoice struct {
	Index        int         `json:"index"`
	Message      wireMessage `json:"message"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
}

type wireMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireUsage struct {
	PromptTokens        int                `json:"prompt_tokens"`
	CompletionTokens    int                `json:"completion_tokens"`
	TotalTokens         int                `json:"total_tokens"`
	PromptTokensDetails wirePromptDetails  `json:"prompt_tokens_details"`
	CompletionDetails   wireCompletionInfo `json:"completion_tokens_details"`
}

type wirePromptDetails struct {
	CachedTokens int `json:"cached_tokens"`
	AudioTokens  int `json:"audio_tokens"`
}

type wireCompletionInfo struct {
	ReasoningTokens int `json:"reasoning_tokens"`
	AudioTokens     int `json:"audio_tokens"`
}

func (s *Server) completion(req openai.ChatCompletionRequest, bodyLen int, step Step) wireResponse {
	s.mu.Lock()
	s.nextResp++
	id := fmt.Sprintf("chatcmpl-%d", s.nextResp)
	cached := s.cached
	calls := make([]wireToolCall, len(step.ToolCalls))
	for i, c := range step.ToolCalls {
		if c.ID == "" {
			s.nextCall++
			c.ID = fmt.Sprintf("call_%d", s.nextCall)
		}
		calls[i] = wireToolCall{ID: c.ID, Type: "function", Function: wireFunction{Name: c.Name, Arguments: c.Arguments}}
	}
	s.mu.Unlock()

	msg := wireMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: calls}
	if step.Text != "" || len(calls) == 0 {
		text := step.Text
		msg.Content = &text
	}
	finish := step.FinishReason
	if finish == "" {
		finish = "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
	}

	// Without a scripted usage, tokens are a rough size (four bytes a token)
	// so that bigger requests report more, as a real model would.
	var u wireUsage
	if step.Usage != nil {
		u.PromptTokens = step.Usage.PromptTokens
		u.CompletionTokens = step.Usage.CompletionTokens
		if d := step.Usage.PromptTokensDetails; d != nil {
			u.PromptTokensDetails.CachedTokens = d.CachedTokens
		}
	} else {
		u.PromptTokens = bodyLen/4 + 1
		out := len(step.Text)
		for _, c := range step.ToolCalls {
			out += len(c.Name) + len(c.Arguments)
		}
		u.CompletionTokens = out/4 + 1
		u.PromptTokensDetails.CachedTokens = min(cached, u.PromptTokens)
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens

	model := req.Model
	if model == "" {
		model = "openaitest"
	}
	return wireResponse{
		ID:      id,
		Object:  "chat.completion",
		Created: time.Now().Unix(),
		Model:   model,
		Choices: []wireChoice{{Index: 0, Message: msg, FinishReason: finish}},
		Usage:   u,
	}
}

func writeError(w http.ResponseWriter, status int, h http.Header, body string) {
	copyHeader(w.Header(), h)
	if body == "" {
		body = errorJSON(errorType(status), http.StatusText(status))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// errorType names the OpenAI error type that goes with a status.
func errorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "invalid_api_key"
	case status == http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

func errorJSON(typ, message string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": typ, "param": nil, "code": strings.ToLower(typ),
	}})
	return string(b)
}

// copyHeaderOver sets the keys of src in dst, replacing their values.
func copyHeaderOver(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		for _, v := range vs {
			dst.Add(k, v)
		}
	}
}
