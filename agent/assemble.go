package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	openai "github.com/sashabaranov/go-openai"
)

// chunk is what Parley reads of a chat.completion.chunk.
type chunk struct {
	Choices []chunkChoice `json:"choices"`
	Usage   *openai.Usage `json:"usage"`
	Error   *wireError    `json:"error"`
	// Groq reports a stream's usage in x_groq, Moonshot in the choice.
	XGroq *struct {
		Usage *openai.Usage `json:"usage"`
	} `json:"x_groq"`
}

type chunkChoice struct {
	Index int `json:"index"`
	Delta struct {
		// Content is read as a string; a chunk whose content is an
		// array of parts is read again for them (see add), which keeps
		// the common chunk to one plain decode.
		Content string `json:"content"`
		Refusal string `json:"refusal"`
		// Reasoning comes as reasoning_content (DeepSeek, Qwen, vLLM,
		// SGLang, llama.cpp), kept to be sent back in the turn's next
		// request as DeepSeek asks, or as reasoning (OpenRouter, Groq),
		// not read; it is never part of the answer.
		ReasoningContent string      `json:"reasoning_content"`
		ToolCalls        []callDelta `json:"tool_calls"`
	} `json:"delta"`
	FinishReason openai.FinishReason `json:"finish_reason"`
	Usage        *openai.Usage       `json:"usage"`
}

// callDelta is a piece of a tool call. The id, type and name come in the
// first piece of a call; the arguments in any number of pieces. Index
// says which call a piece belongs to, but servers do not all keep to it
// (see addCall).
type callDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// assembler builds one answer from its chunks.
type assembler struct {
	c         chunk // decoded into, reused
	content   []byte
	refusal   []byte
	reasoning []byte // reasoning_content only: what DeepSeek wants back
	calls     []partialCall
	finish    openai.FinishReason
	usage     openai.Usage
	chunks    int // chunks with a choice for the answer
	size      int // bytes of text, refusal, reasoning and arguments so far
}

// partialCall is a tool call being assembled.
type partialCall struct {
	index int // the index it was opened with, or its place
	call  openai.ToolCall
	args  []byte
}

// add reads one chunk into the answer, passing its text to onText.
func (a *assembler) add(data []byte, onText func(string)) error {
	clear(a.c.Choices[:cap(a.c.Choices)])
	a.c = chunk{Choices: a.c.Choices[:0]}
	if err := json.Unmarshal(data, &a.c); err != nil {
		if err := a.readParts(data, err); err != nil {
			return fmt.Errorf("decode a chunk of the answer: %w", err)
		}
	}
	if e := a.c.Error; e != nil && e.e != nil {
		return e.e
	}
	switch {
	case a.c.Usage != nil:
		a.usage = *a.c.Usage
	case a.c.XGroq != nil && a.c.XGroq.Usage != nil:
		a.usage = *a.c.XGroq.Usage
	}
	for i := range a.c.Choices {
		ch := &a.c.Choices[i]
		if ch.Index != 0 {
			continue // Parley asks for one choice; others are not its answer
		}
		a.chunks++
		if text := ch.Delta.Content; text != "" {
			a.content = append(a.content, text...)
			if onText != nil {
				onText(text)
			}
		}
		a.refusal = append(a.refusal, ch.Delta.Refusal...)
		a.reasoning = append(a.reasoning, ch.Delta.ReasoningContent...)
		a.size += len(ch.Delta.Content) + len(ch.Delta.Refusal) + len(ch.Delta.ReasoningContent)
		for _, d := range ch.Delta.ToolCalls {
			if err := a.addCall(d); err != nil {
				return err
			}
			a.size += len(d.Function.Arguments)
		}
		if a.size > maxResponseBytes {
			return errResponseTooLarge
		}
		if ch.FinishReason != "" {
			a.finish = ch.FinishReason
		}
		if ch.Usage != nil {
			a.usage = *ch.Usage
		}
	}
	return nil
}

// partsChunk is the content of a chunk's choices in every shape.
type partsChunk struct {
	Choices []struct {
		Delta struct {
			Content content `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
}

// readParts completes a chunk that failed to decode only because a
// choice's content is not a string (Mistral's parts): the decoder read
// everything else, and the content is read again in every shape. Any
// other failure is returned as it is.
func (a *assembler) readParts(data []byte, err error) error {
	var typeErr *json.UnmarshalTypeError
	if !errors.As(err, &typeErr) || typeErr.Field != "choices.delta.content" {
		return err
	}
	var p partsChunk
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	for i := range min(len(p.Choices), len(a.c.Choices)) {
		a.c.Choices[i].Delta.Content = p.Choices[i].Delta.Content.text
	}
	return nil
}

// addCall adds a piece to its call. Servers differ in what they keep to:
// Ollama gives every call of an answer index 0, each with its own id; some
// give a call's first piece one index and the rest another; some send no
// index at all. So a piece goes to
//
//   - the call with its id, when it has one; a new id that comes with a
//     name opens a new call, even under an index a call already has;
//   - else the newest call with its index;
//   - else, with no index or an index no call has and no name of its own
//     (a piece that cannot start a call), the last call;
//   - else a new call.
func (a *assembler) addCall(d callDelta) error {
	p := a.callFor(d)
	if p == nil {
		if len(a.calls) >= maxStreamedCalls {
			return errTooManyCalls
		}
		index := len(a.calls)
		if d.Index != nil {
			index = *d.Index
		}
		a.calls = append(a.calls, partialCall{index: index, call: openai.ToolCall{Type: openai.ToolTypeFunction}})
		p = &a.calls[len(a.calls)-1]
	}
	if d.ID != "" && p.call.ID == "" {
		p.call.ID = d.ID
	}
	if d.Type != "" {
		p.call.Type = openai.ToolType(d.Type)
	}
	if d.Function.Name != "" {
		// Some servers repeat the name in every piece; none splits it.
		p.call.Function.Name = d.Function.Name
	}
	p.args = append(p.args, d.Function.Arguments...)
	return nil
}

// callFor is the call a piece continues, or nil when it opens one.
func (a *assembler) callFor(d callDelta) *partialCall {
	n := len(a.calls)
	if n == 0 {
		return nil
	}
	if d.ID != "" {
		for i := n - 1; i >= 0; i-- {
			if a.calls[i].call.ID == d.ID {
				return &a.calls[i]
			}
		}
		// A new id with a name: a new call, unless the call under its
		// index has no id yet (a server that sends the id after the
		// name). A new id without a name cannot start a call: GLM-4's
		// own server gives every piece of one call an id of its own.
		if d.Function.Name != "" {
			if d.Index != nil {
				if p := a.newestAt(*d.Index); p != nil && p.call.ID == "" {
					return p
				}
			}
			return nil
		}
	}
	if d.Index != nil {
		if p := a.newestAt(*d.Index); p != nil {
			return p
		}
	}
	if d.Function.Name == "" {
		return &a.calls[n-1]
	}
	return nil
}

// newestAt is the last call opened with index i.
func (a *assembler) newestAt(i int) *partialCall {
	for k := len(a.calls) - 1; k >= 0; k-- {
		if a.calls[k].index == i {
			return &a.calls[k]
		}
	}
	return nil
}

// response is the assembled answer, shaped as a response sent whole. A
// stream that ended before saying why the answer ended was cut short.
func (a *assembler) response() (openai.ChatCompletionResponse, error) {
	if a.chunks == 0 {
		return openai.ChatCompletionResponse{}, errNoChoices
	}
	if a.finish == "" {
		return openai.ChatCompletionResponse{}, errStreamCut
	}
	msg := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: string(a.content), Refusal: string(a.refusal),
		ReasoningContent: string(a.reasoning)}
	if len(a.calls) > 0 {
		// Calls sharing an index keep the order they were opened in.
		slices.SortStableFunc(a.calls, func(x, y partialCall) int { return x.index - y.index })
		msg.ToolCalls = make([]openai.ToolCall, len(a.calls))
		for i, p := range a.calls {
			p.call.Function.Arguments = string(p.args)
			msg.ToolCalls[i] = p.call
		}
	}
	return openai.ChatCompletionResponse{
		Choices: []openai.ChatCompletionChoice{{Message: msg, FinishReason: a.finish}},
		Usage:   a.usage,
	}, nil
}
