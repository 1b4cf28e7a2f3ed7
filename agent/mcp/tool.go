package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/internal/pausable"
	"github.com/parleyhq/parley/sessions"
)

// Limits on what a server hands the model. They live here, in code, so that
// no server can grow every request or flood a conversation.
const (
	// maxResult is the most of one result the model gets.
	maxResult = 16 << 10
	// maxErrorText cuts the text of an isError result or a refusal: the
	// model needs the gist, not a stack trace.
	maxErrorText = 1 << 10
	// maxDescription cuts a tool's description; it is sent with every
	// request that offers the tool.
	maxDescription = 2 << 10
	// maxSchema refuses a tool whose parameter schema is larger: it too
	// is sent with every request.
	maxSchema = 32 << 10
)

// emptySchema is offered for a tool that declares no input schema.
const emptySchema = `{"type":"object","properties":{}}`

// definition is what the server says a tool is. A refresh of the list
// swaps it whole, so a turn always sees one consistent version.
type definition struct {
	original    string // the server's name for it
	description string
	params      json.RawMessage
	writes      bool
	rule        string // what decided writes
	readClaimed bool   // read only by the server's untrusted readOnlyHint
}

// tool is one server tool as the agent sees it. Its name is fixed; what it
// is may change with the server's list.
type tool struct {
	name    string
	srv     *server
	def     atomic.Pointer[definition]
	removed atomic.Bool // the server no longer lists it
}

var (
	_ agent.Tool         = (*tool)(nil)
	_ agent.Availability = (*tool)(nil)
	_ agent.ClaimedClass = (*tool)(nil)
)

// IdempotencyKeyMeta is the _meta key of a write call's idempotency key:
// the same on every attempt Parley makes at one call, so that a server can
// tell a call it has already carried out.
const IdempotencyKeyMeta = "parley/idempotency-key"

func (t *tool) Name() string                { return t.name }
func (t *tool) Description() string         { return t.def.Load().description }
func (t *tool) Parameters() json.RawMessage { return t.def.Load().params }
func (t *tool) Writes() bool                { return t.def.Load().writes }

// ReadClaimed reports whether the tool is read only by its server's
// readOnlyHint, on a server not marked trust_annotations.
func (t *tool) ReadClaimed() bool { return t.def.Load().readClaimed }

// Available reports whether the server is connected and still lists the
// tool: the model is not offered tools that cannot run.
func (t *tool) Available() bool { return !t.removed.Load() && t.srv.isUp() }

// Source names where the tool comes from, "mcp:SERVER", for operators'
// listings.
func (t *tool) Source() string { return "mcp:" + t.srv.name }

// Call runs the tool on the server within the server's timeout. The turn's
// context reaches the server: when the turn is abandoned, the SDK sends
// notifications/cancelled. Closing the Manager cancels calls in flight.
func (t *tool) Call(ctx context.Context, tc *agent.TurnContext, args json.RawMessage) (agent.Result, error) {
	def := t.def.Load()
	s := t.srv
	s.calls.RLock()
	defer s.calls.RUnlock()
	sess := s.current()
	switch {
	case t.removed.Load():
		return agent.Result{}, fmt.Errorf("MCP server %s no longer offers this tool", s.name)
	case sess == nil:
		return agent.Result{}, fmt.Errorf("MCP server %s is not connected right now; answer without this tool", s.name)
	}
	start := time.Now()
	// The call's clock stops while its server waits for a person's
	// answer (elicit.go): their time is not the server's.
	callCtx, cancel := pausable.WithTimeout(ctx, s.cfg.Timeout, errCallTimeout)
	defer cancel()
	defer context.AfterFunc(s.m.ctx, cancel)()

	params := &sdk.CallToolParams{Name: def.original, Arguments: args}
	if tc != nil && tc.CallKey != "" {
		// Parley runs a write call at most once per message; a server
		// that records the key can keep its own side to once as well.
		params.Meta = sdk.Meta{IdempotencyKeyMeta: tc.CallKey}
	}
	// The token ties the server's progress and questions to this call.
	token, done := s.inflight.add(&call{tool: t.name, turn: tc, ctx: callCtx})
	defer done()
	params.SetProgressToken(token)
	res, err := sess.CallTool(callCtx, params)
	content, files, err := t.outcome(ctx, callCtx, res, err)

	level, msg := slog.LevelDebug, "mcp: tool call"
	if def.writes {
		// The audit trail of write tools: who made the bot change what.
		level, msg = slog.LevelInfo, "audit: mcp tool call"
	}
	attrs := []any{"tool", t.name, "writes", def.writes, "duration", time.Since(start), "bytes", len(content), "err", err}
	if tc != nil {
		attrs = append(attrs, "channel", tc.Channel, "conversation", sessions.ShownKey(tc.Conversation), "user", tc.User)
	}
	s.log.Log(ctx, level, msg, attrs...)
	if err != nil {
		return agent.Result{}, s.secrets.error(err)
	}
	return agent.Result{Content: content, Files: files}, nil
}

// outcome turns what CallTool returned into the model's text and the
// files it holds, or a short error. ctx is the turn's context, callCtx the
// call's.
func (t *tool) outcome(ctx, callCtx context.Context, res *sdk.CallToolResult, err error) (string, []agent.File, error) {
	s := t.srv
	if err != nil {
		var wire *jsonrpc.Error
		switch {
		case ctx.Err() != nil:
			return "", nil, fmt.Errorf("the turn ended before %s answered: %w", t.name, ctx.Err())
		case errors.Is(context.Cause(callCtx), errCallTimeout):
			return "", nil, fmt.Errorf("tool %s gave no answer within %s; it was cancelled: %w", t.name, s.cfg.Timeout, context.DeadlineExceeded)
		case s.m.ctx.Err() != nil:
			return "", nil, fmt.Errorf("MCP server %s is shutting down", s.name)
		case errors.As(err, &wire):
			return "", nil, fmt.Errorf("MCP server %s refused the call: %s", s.name, cutText(wire.Message, maxErrorText))
		}
		return "", nil, fmt.Errorf("MCP server %s failed: %s", s.name, cutText(err.Error(), maxErrorText))
	}
	text, files := render(res)
	if res.IsError {
		return "", nil, fmt.Errorf("the tool reported an error: %s", cutText(text, maxErrorText))
	}
	return cut(text, maxResult), files, nil
}

// render writes a result as text, and hands over the files it holds:
// images and embedded binary resources become files of the turn (kept and
// described by the agent, with the id send_file takes). Audio and links
// are described, never dropped silently; a link's content is not fetched
// (it could point anywhere, an internal address included).
func render(res *sdk.CallToolResult) (string, []agent.File) {
	var b strings.Builder
	var files []agent.File
	sep := func() {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			sep()
			b.WriteString(c.Text)
		case *sdk.ImageContent:
			files = append(files, agent.File{Name: "image", Type: c.MIMEType, Data: c.Data})
		case *sdk.AudioContent:
			sep()
			fmt.Fprintf(&b, "[audio: %s, %s — not played, this conversation passes no audio to the model]", mimeOr(c.MIMEType, "unknown type"), byteSize(len(c.Data)))
		case *sdk.ResourceLink:
			sep()
			renderLink(&b, c)
		case *sdk.EmbeddedResource:
			if r := c.Resource; r != nil && r.Blob != nil {
				files = append(files, agent.File{Name: resourceName(r.URI), Type: r.MIMEType, Data: r.Blob})
				continue
			}
			sep()
			renderResource(&b, c.Resource)
		default:
			sep()
			fmt.Fprintf(&b, "[content of type %T — not shown]", c)
		}
	}
	if len(res.Content) == 0 && res.StructuredContent != nil {
		if data, err := json.Marshal(res.StructuredContent); err == nil {
			b.Write(data)
		}
	}
	if b.Len() == 0 && len(files) == 0 {
		return "(the tool returned no content)", nil
	}
	return b.String(), files
}

// renderLink describes a resource link; its content is not fetched.
func renderLink(b *strings.Builder, c *sdk.ResourceLink) {
	fmt.Fprintf(b, "[resource link: %s <%s>", c.Name, c.URI)
	if c.MIMEType != "" {
		fmt.Fprintf(b, ", %s", c.MIMEType)
	}
	if c.Size != nil {
		fmt.Fprintf(b, ", %s", byteSize(int(*c.Size)))
	}
	if c.Description != "" {
		fmt.Fprintf(b, ": %s", c.Description)
	}
	b.WriteString(" — not fetched, so it cannot be sent as a file]")
}

// resourceName is the last element of a resource's URI, for its file's
// name (made safe before it is sent).
func resourceName(uri string) string {
	uri, _, _ = strings.Cut(uri, "?")
	if i := strings.LastIndexAny(uri, "/\\"); i >= 0 {
		uri = uri[i+1:]
	}
	if uri == "" {
		return "file"
	}
	return uri
}

func renderResource(b *strings.Builder, r *sdk.ResourceContents) {
	switch {
	case r == nil:
		b.WriteString("[embedded resource without contents]")
	default:
		fmt.Fprintf(b, "[resource <%s>", r.URI)
		if r.MIMEType != "" {
			fmt.Fprintf(b, ", %s", r.MIMEType)
		}
		b.WriteString("]\n")
		b.WriteString(r.Text)
	}
}

func mimeOr(mime, fallback string) string {
	if mime == "" {
		return fallback
	}
	return mime
}

func byteSize(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// cutNoteRoom is reserved for cut's note, which is never longer.
const cutNoteRoom = 96

// cut returns s if it fits in limit bytes, else its beginning and a note
// saying how much was left out, together at most limit bytes, cut on a
// character boundary.
func cut(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	keep := runeStart(s, limit-cutNoteRoom)
	return s[:keep] + fmt.Sprintf("\n\n[result cut: %d of its %d bytes left out]", len(s)-keep, len(s))
}

// cutText shortens an error or description to limit bytes with an ellipsis.
func cutText(s string, limit int) string {
	s = strings.TrimSpace(s)
	if len(s) <= limit {
		return s
	}
	return s[:runeStart(s, limit-len("…"))] + "…"
}

// runeStart backs i up to the start of a character of s.
func runeStart(s string, i int) int {
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// schema checks and normalises a tool's input schema for the chat
// completions API, which wants a JSON object of type "object". A missing
// schema means no arguments; a missing type is taken as "object". Anything
// else that is not such an object, or is too large, is refused: offering it
// would make the API reject every request.
func schema(in any) (json.RawMessage, error) {
	if in == nil {
		return json.RawMessage(emptySchema), nil
	}
	data, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("input schema does not encode: %w", err)
	}
	if len(data) > maxSchema {
		return nil, fmt.Errorf("input schema of %d bytes is over the %d-byte limit", len(data), maxSchema)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return nil, errors.New("input schema is not a JSON object")
	}
	switch typ := m["type"]; typ {
	case nil:
		m["type"] = "object"
	case "object":
	default:
		return nil, fmt.Errorf("input schema has type %v, not object", typ)
	}
	// Encoding the map sorts its keys, so the schema is byte-identical
	// from one listing to the next and prompt caches keep working.
	return json.Marshal(m)
}

// errCallTimeout is the cause of a call's context when its timeout passed.
var errCallTimeout = fmt.Errorf("the tool call's timeout passed: %w", context.DeadlineExceeded)
