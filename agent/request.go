package agent

// The request side of a turn: the encoded system message, the tools
// offered, and the request body written from them and the stored history.

import (
	"bytes"
	"encoding/json"

	openai "github.com/sashabaranov/go-openai"

	"github.com/parleyhq/parley/internal/jsonstring"
	"github.com/parleyhq/parley/sessions"
)

// turnRequest writes one request of a turn to ep into a pooled buffer: the
// system message, the stored history as stored, this turn's messages, and
// on the last request the budget note instead of tools. The caller returns
// the buffer to bodyPool.
func (a *Agent) turnRequest(ep *endpoint, system []byte, hist *plan, turn []sessions.Message, last bool, tools [][]byte, media turnMedia) *[]byte {
	buf := bodyPool.Get().(*[]byte)
	w := requestWriter{buf: (*buf)[:0], vision: ep.vision, images: media.images, history: media.history, reasoner: ep.key, reasonerToken: ep.keyToken}
	w.begin(ep.model)
	w.raw(system)
	hist.write(&w)
	for i := range turn {
		w.message(&turn[i])
	}
	if last {
		w.raw(budgetMessage)
	}
	w.end(a.cfg.MaxTokens, tools)
	*buf = w.buf
	return buf
}

// budgetMessage is budgetNote as a user message, encoded.
var budgetMessage = appendMessage(nil, openai.ChatMessageRoleUser, budgetNote)

// appendMessage encodes a message of role and content.
func appendMessage(buf []byte, role, content string) []byte {
	buf = append(buf, `{"role":`...)
	buf = jsonstring.Append(buf, role)
	buf = append(buf, `,"content":`...)
	buf = jsonstring.Append(buf, content)
	return append(buf, '}')
}

// systemMessage is the encoded system message of persona p with extra,
// kept per persona for the next turn with the same p and extra (the
// skill index changes only on reloads and state changes). The cache holds
// one message per profile name, which the configuration bounds.
func (a *Agent) systemMessage(p Persona, extra string) []byte {
	if v, ok := a.systems.Load(p.Name); ok {
		if c := v.(*encodedSystem); c.persona == p && c.extra == extra {
			return c.json
		}
	}
	c := &encodedSystem{persona: p, extra: extra, json: appendMessage(nil, openai.ChatMessageRoleSystem, a.SystemPromptFor(p, extra))}
	a.systems.Store(p.Name, c)
	return c.json
}

// encodedSystem is one system message, encoded, and what it was built of.
type encodedSystem struct {
	persona Persona
	extra   string
	json    []byte
}

// encodeTool is t as a request offers it, encoded once and again only
// when its description or parameters change.
func (a *Agent) encodeTool(t Tool) []byte {
	params := t.Parameters()
	if params == nil {
		params = json.RawMessage(emptySchema)
	}
	a.toolsMu.Lock()
	defer a.toolsMu.Unlock()
	if e, ok := a.encoded[t.Name()]; ok && e.description == t.Description() && bytes.Equal(e.params, params) {
		return e.json
	}
	b, err := json.Marshal(openai.Tool{
		Type:     openai.ToolTypeFunction,
		Function: &openai.FunctionDefinition{Name: t.Name(), Description: t.Description(), Parameters: params},
	})
	if err != nil {
		// Parameters that are not JSON: offered without them rather than
		// failing every turn.
		b, _ = json.Marshal(openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Name(), Description: t.Description(), Parameters: json.RawMessage(emptySchema)}})
	}
	if a.encoded == nil {
		a.encoded = map[string]encodedTool{}
	}
	a.encoded[t.Name()] = encodedTool{description: t.Description(), params: params, json: b}
	return b
}

// emptySchema is offered for tools without parameters: the API wants an
// object schema for every function.
const emptySchema = `{"type":"object","properties":{}}`
