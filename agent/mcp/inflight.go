package mcp

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/agent"
)

// Progress is one notifications/progress of a tool call in flight: what
// the live status shows ("running github__search… 2/3").
type Progress struct {
	// Tool is the offered name (SERVER__TOOL) of the call.
	Tool string
	// Turn is the turn that made the call (nil when the caller gave none).
	Turn *agent.TurnContext
	// Progress rises with every notification; Total is 0 when unknown.
	Progress, Total float64
	// Message is the server's own words, if any (untrusted text).
	Message string
}

// String is the status line: "running TOOL… 2/3", "running TOOL… 40%"
// when the total is 100, or "running TOOL… 2" when there is none.
func (p Progress) String() string {
	s := "running " + p.Tool + "…"
	switch {
	case p.Total == 100:
		s += fmt.Sprintf(" %g%%", p.Progress)
	case p.Total > 0:
		s += fmt.Sprintf(" %g/%g", p.Progress, p.Total)
	case p.Progress > 0:
		s += fmt.Sprintf(" %g", p.Progress)
	}
	if p.Message != "" {
		s += " " + cutText(p.Message, 120)
	}
	return s
}

// call is one tool call in flight on a server.
type call struct {
	tool string
	turn *agent.TurnContext
	ctx  context.Context // ends with the call
}

// inflight maps the progress token of each call in flight to its call, so
// that a server's progress and questions reach the right turn.
type inflight struct {
	mu    sync.Mutex
	calls map[string]*call
}

// add records c under a fresh token and returns the token and the function
// that forgets it.
func (f *inflight) add(c *call) (string, func()) {
	token := "parley-" + rand.Text()
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]*call{}
	}
	f.calls[token] = c
	f.mu.Unlock()
	return token, func() {
		f.mu.Lock()
		delete(f.calls, token)
		f.mu.Unlock()
	}
}

func (f *inflight) byToken(token any) *call {
	t, ok := token.(string)
	if !ok {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[t]
}

// asker is the call a server's request is about: the one whose progress
// token the request carries, else the only call in flight, or the calls
// in flight when all are one person's in one conversation. Nil when it
// cannot be told: the protocol does not tie a server's request to the call
// it arose in, and guessing could put one person's question to another.
func (f *inflight) asker(token any) *call {
	if c := f.byToken(token); c != nil {
		return c
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var only *call
	for _, c := range f.calls {
		switch {
		case only == nil:
			only = c
		case c.turn == nil || only.turn == nil,
			c.turn.Conversation != only.turn.Conversation, c.turn.User != only.turn.User:
			return nil
		}
	}
	return only
}

// progress is the client's notifications/progress handler.
func (s *server) progress(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
	c := s.inflight.byToken(req.Params.ProgressToken)
	if c == nil || s.m.onProgress == nil {
		return
	}
	s.m.onProgress(c.ctx, Progress{Tool: c.tool, Turn: c.turn, Progress: req.Params.Progress, Total: req.Params.Total, Message: req.Params.Message})
}

// serverLog is the client's notifications/message handler: a server's log
// lines go to Parley's log at debug, whatever level the server gave, so a
// chatty server cannot fill the operator's log.
func (s *server) serverLog(ctx context.Context, req *sdk.LoggingMessageRequest) {
	p := req.Params
	s.log.Log(ctx, slog.LevelDebug, "mcp: server log", "level", string(p.Level), "logger", p.Logger, "data", p.Data)
}
