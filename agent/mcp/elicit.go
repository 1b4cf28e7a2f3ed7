package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/agent"
)

// Elicitor answers a server's elicitation/create: a question the server
// asks the user while one of its tools runs ("which repository?", "really
// delete?"). The gateway implements it by relaying the question to the
// chat the call came from and waiting for the person who asked.
//
// ctx carries who asked: TurnFrom(ctx) is the turn whose tool call the
// server was running (its channel, conversation and user); only that user
// may answer. ctx ends when the call is abandoned or times out, the turn
// ends or the Manager closes; Elicit must then return.
//
// Elicit returns the person's answer: ElicitAccept with Content (form
// mode; validated against req.Schema with req.Check before it reaches the
// server), ElicitDecline or ElicitCancel. An error is sent to the server as
// the request's failure; say decline instead when the person said no.
type Elicitor interface {
	Elicit(ctx context.Context, req *ElicitRequest) (*ElicitResult, error)
}

// Elicitation modes (ElicitRequest.Mode).
const (
	// ElicitForm asks for values matching ElicitRequest.Schema.
	ElicitForm = "form"
	// ElicitURL asks the person to open ElicitRequest.URL (a sign-in, a
	// payment) and say when done; nothing is sent back but the action.
	ElicitURL = "url"
)

// Elicitation actions (ElicitResult.Action), as the protocol spells them.
const (
	ElicitAccept  = "accept"
	ElicitDecline = "decline"
	ElicitCancel  = "cancel"
)

// ElicitRequest is one question from a server.
type ElicitRequest struct {
	// Server is the configured server name (tools.mcp.servers.NAME).
	Server string
	// Tool is the offered name (SERVER__TOOL) of the call that was
	// running when the server asked.
	Tool string
	// Mode is ElicitForm or ElicitURL.
	Mode string
	// Message is the server's question, to show as it is (it is the
	// server's text: show it as untrusted, never as Parley's own).
	Message string
	// Schema is the requested schema of a form: a flat object whose
	// properties are strings (with enum or oneOf for choices), numbers,
	// integers or booleans, with titles, descriptions and defaults.
	Schema json.RawMessage
	// URL and ID are a URL-mode request's link and elicitation id.
	URL string
	ID  string

	schema *jsonschema.Resolved // Schema, resolved; nil for none
}

// ElicitResult is the person's answer.
type ElicitResult struct {
	Action  string         // ElicitAccept, ElicitDecline or ElicitCancel
	Content map[string]any // the form's values, for ElicitAccept in form mode
}

// Check reports whether content answers the request's form: every
// required property present, each value of its property's type, within
// its enum, bounds and lengths. A relay calls it on the person's answer
// and asks again when it fails; the Manager calls it again before the
// answer leaves.
func (r *ElicitRequest) Check(content map[string]any) error {
	if r.schema == nil {
		return nil
	}
	if err := r.schema.Validate(content); err != nil {
		return fmt.Errorf("the answer does not match the form: %w", err)
	}
	return nil
}

// turnKey carries the asking turn in an Elicitor's context.
type turnKey struct{}

// TurnFrom returns the turn whose tool call led to the request being
// answered in ctx: who asked, and so who may answer.
func TurnFrom(ctx context.Context) (*agent.TurnContext, bool) {
	tc, ok := ctx.Value(turnKey{}).(*agent.TurnContext)
	return tc, ok && tc != nil
}

// elicit is the client's elicitation/create handler. It finds the call the
// server is asking about, hands the question to the Manager's Elicitor
// and checks the answer. Without an Elicitor, or when it cannot tell
// which call (and so which person) the question is for, it declines: a
// question must never reach someone other than the person whose message
// led to the call.
func (s *server) elicit(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	p := req.Params
	call := s.inflight.asker(p.GetProgressToken())
	e := s.m.elicitor
	switch {
	case e == nil:
		s.log.Info("mcp: elicitation declined: no one to ask (no elicitation relay configured)")
		return &sdk.ElicitResult{Action: ElicitDecline}, nil
	case call == nil:
		s.log.Info("mcp: elicitation declined: it cannot be told which call, and so which person, it is for")
		return &sdk.ElicitResult{Action: ElicitDecline}, nil
	}
	r, err := newElicitRequest(s.name, call.tool, p)
	if err != nil {
		return nil, err
	}
	// The question is asked under the call it belongs to (whose context
	// carries what the caller put there: who to ask, and how) and ends
	// with it, or with the server's request.
	askCtx, cancel := context.WithCancel(context.WithValue(call.ctx, turnKey{}, call.turn))
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	res, err := e.Elicit(askCtx, r)
	switch {
	case err != nil:
		return nil, s.secrets.error(fmt.Errorf("the question was not answered: %w", err))
	case res == nil:
		return &sdk.ElicitResult{Action: ElicitCancel}, nil
	}
	switch res.Action {
	case ElicitAccept:
		if r.Mode == ElicitURL {
			return &sdk.ElicitResult{Action: ElicitAccept}, nil
		}
		content := res.Content
		if content == nil {
			content = map[string]any{}
		}
		if err := r.Check(content); err != nil {
			return nil, err
		}
		return &sdk.ElicitResult{Action: ElicitAccept, Content: content}, nil
	case ElicitDecline, ElicitCancel:
		return &sdk.ElicitResult{Action: res.Action}, nil
	}
	return nil, fmt.Errorf("elicitation answer has action %q, not accept, decline or cancel", res.Action)
}

func newElicitRequest(server, tool string, p *sdk.ElicitParams) (*ElicitRequest, error) {
	r := &ElicitRequest{Server: server, Tool: tool, Mode: p.Mode, Message: p.Message, URL: p.URL, ID: p.ElicitationID}
	if r.Mode == "" {
		r.Mode = ElicitForm
	}
	if r.Mode != ElicitForm || p.RequestedSchema == nil {
		return r, nil
	}
	data, err := json.Marshal(p.RequestedSchema)
	if err != nil {
		return nil, fmt.Errorf("requested schema: %w", err)
	}
	var sch jsonschema.Schema
	if err := json.Unmarshal(data, &sch); err != nil {
		return nil, fmt.Errorf("requested schema: %w", err)
	}
	resolved, err := sch.Resolve(&jsonschema.ResolveOptions{Loader: refusedLoader})
	if err != nil {
		return nil, fmt.Errorf("requested schema: %w", err)
	}
	r.Schema, r.schema = data, resolved
	return r, nil
}

// refusedLoader refuses every remote $ref: a server's form may not make
// Parley fetch anything.
func refusedLoader(*url.URL) (*jsonschema.Schema, error) {
	return nil, errors.New("remote schema references are not followed")
}
