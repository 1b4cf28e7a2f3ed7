package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/parleyhq/parley/audit"
	"github.com/parleyhq/parley/internal/ident"
	"github.com/parleyhq/parley/sessions"
)

// A Tool is a function the model may call during a turn.
//
// Call receives the arguments exactly as the model sent them, already checked
// to be a JSON object. It runs concurrently with other read-only calls of the
// same batch, so a tool whose Writes reports false must be safe for
// concurrent use. An error from Call is shown to the model as the tool's
// result; it does not end the turn.
type Tool interface {
	// Name is what the model calls; it must match ^[a-zA-Z0-9_-]{1,64}$.
	Name() string
	// Description tells the model when to use the tool.
	Description() string
	// Parameters is the JSON schema of the arguments object. Nil means the
	// tool takes no arguments. It is asked for every model request, and
	// callers never modify what it returns, so a tool may return the same
	// bytes each time.
	Parameters() json.RawMessage
	// Writes reports whether the tool changes state. Write tools run one at
	// a time, in the order the model called them, and policies may exclude
	// them.
	Writes() bool
	Call(ctx context.Context, tc *TurnContext, args json.RawMessage) (Result, error)
}

// Result is what a tool call produced.
type Result struct {
	// Content becomes the tool message, wrapped as untrusted data.
	Content string
	// Inject holds messages appended after the whole batch of tool results
	// of this iteration, in call order, so that the model sees them in its
	// next request (skill injections). They are sent as user messages and
	// stored with Kind sessions.KindInjection unless they name another Kind.
	Inject []sessions.Message
	// Files are the files the call made (an image, an embedded resource):
	// the turn keeps each (TurnRequest.Files) and describes it, with the
	// id send_file takes, after Content.
	Files []File
	// Send names kept files to go out with the answer (send_file).
	Send []Outgoing
}

// TurnContext describes the conversation a tool is called in.
type TurnContext struct {
	Channel      string
	Workspace    string
	Chat         string
	Conversation string
	User         string
	// History is what the model sees this turn: the sanitised stored
	// history followed by this turn's messages so far, including injections
	// made by earlier iterations. It is shared between concurrent calls and
	// must not be modified.
	History []sessions.Message
	// Skills is the turn's view of the skills (nil when there are none).
	Skills *SkillSet
	// CallKey is the idempotency key of this call of a write tool: the
	// same on every attempt at the message, different for every other
	// call. Empty for read tools and when calls are not recorded. A tool
	// that calls a service able to de-duplicate passes it on.
	CallKey string

	// audit records the turn's write calls (nil: none); approver is who
	// approved the call running now. Neither is a tool's business.
	audit    audit.Recorder
	approver string
	files    *turnFiles
}

// Sequential is implemented by read-only tools whose calls must not run
// concurrently with each other because each decides on what the previous
// one injected (load_skill's de-duplication and budget). They run one at a
// time, in call order, with the write tools, and each sees the injections of
// the calls before it in TurnContext.History.
type Sequential interface {
	Sequential() bool
}

// ClaimedClass is implemented by tools whose class can rest on what their
// source says of itself rather than on the operator's configuration: an
// MCP tool that is read only because its server's readOnlyHint says so.
// ReadClaimed reports whether that is the case, so that a policy that
// allows no writes need not take the tool's word for it. It is called on
// every request, so it must be cheap and safe for concurrent use.
type ClaimedClass interface {
	ReadClaimed() bool
}

// ReadClaimed reports whether t is a read tool only by its source's claim
// (see ClaimedClass); tools without ClaimedClass never are.
func ReadClaimed(t Tool) bool {
	c, ok := t.(ClaimedClass)
	return ok && !t.Writes() && c.ReadClaimed()
}

// Sender is implemented by the tools of the class send (send_file): they
// change nothing outside the chat, so they are not writes, and the policy
// offers them by files.send rather than tools.write.
type Sender interface {
	Sends() bool
}

// Sends reports whether t is of the class send.
func Sends(t Tool) bool {
	s, ok := t.(Sender)
	return ok && s.Sends()
}

// Availability is implemented by tools that can be unable to run for a
// while, such as the tools of an MCP server that is restarting. A tool whose
// Available reports false is not offered to the model, and a call to it is
// answered with an "unavailable" outcome without running it. Available is
// called on every request, so it must be cheap and safe for concurrent use.
type Availability interface {
	Available() bool
}

// isAvailable reports whether t can run now; tools without Availability
// always can.
func isAvailable(t Tool) bool {
	a, ok := t.(Availability)
	return !ok || a.Available()
}

// Errors returned by Registry.Register.
var (
	ErrInvalidToolName = errors.New("agent: invalid tool name")
	ErrDuplicateTool   = errors.New("agent: duplicate tool")
)

// toolNameChars and the length are what the API accepts as a tool's name:
// toolNamePattern.
var toolNameChars = ident.Of("a-zA-Z0-9_-")

const toolNamePattern = `^[a-zA-Z0-9_-]{1,64}$`

// Registry holds the tools an Agent can offer. It is safe for concurrent
// use; tools registered while a turn runs are seen from the next turn on.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]Tool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tools: make(map[string]Tool)}
}

// Register adds t. It fails when the name is invalid or taken, or when the
// parameter schema is not a JSON object, because the API would then reject
// every request that offers the tool.
func (r *Registry) Register(t Tool) error {
	if t == nil {
		return fmt.Errorf("%w: nil tool", ErrInvalidToolName)
	}
	name := t.Name()
	if !toolNameChars.Match(name, 1, 64) {
		return fmt.Errorf("%w: %q must match %s", ErrInvalidToolName, name, toolNamePattern)
	}
	if p := t.Parameters(); p != nil && !isJSONObject(p) {
		return fmt.Errorf("agent: tool %q: parameters are not a JSON schema object", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tools[name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateTool, name)
	}
	r.tools[name] = t
	return nil
}

// Unregister removes the tool called name and reports whether there was
// one. Tools come and go at run time when an MCP server changes its list; a
// turn that already holds the tool may still call it.
func (r *Registry) Unregister(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.tools[name]
	delete(r.tools, name)
	return ok
}

// Get returns the tool called name.
func (r *Registry) Get(name string) (Tool, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// All returns every tool, sorted by name. The order is stable so that the
// tools part of a request stays byte-identical from turn to turn (prompt
// caches depend on it).
func (r *Registry) All() []Tool {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	out := make([]Tool, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t)
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b Tool) int { return strings.Compare(a.Name(), b.Name()) })
	return out
}

// isJSONObject reports whether b is valid JSON whose top level is an object.
func isJSONObject(b []byte) bool {
	if !json.Valid(b) {
		return false
	}
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}
