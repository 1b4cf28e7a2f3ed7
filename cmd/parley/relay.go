package main

import (
	"context"
	"sync/atomic"

	"github.com/parleyhq/parley/agent/mcp"
	"github.com/parleyhq/parley/gateway"
)

// toolRelay is what the tool sources are handed to reach the chat a call
// came from: a tool server's questions (mcp.Elicitor) and its calls'
// progress. The sources start before the gateway does, so it is bound to
// the gateway once that is built; until then a question is declined and
// progress shown nowhere.
type toolRelay struct {
	gw atomic.Pointer[gateway.Gateway]
}

var _ mcp.Elicitor = (*toolRelay)(nil)

// hooks are the relay as toolsource.Deps.Hooks hands it to the sources.
func (r *toolRelay) hooks() []any {
	return []any{r, r.progress}
}

// Elicit implements mcp.Elicitor: the question is put to the person whose
// message led to the call, in that conversation (gateway.Ask).
func (r *toolRelay) Elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	gw := r.gw.Load()
	if gw == nil {
		return &mcp.ElicitResult{Action: mcp.ElicitDecline}, nil
	}
	q := gateway.Question{From: req.Server, Message: req.Message, Schema: req.Schema}
	if req.Mode == mcp.ElicitURL {
		q.URL, q.Schema = req.URL, nil
	}
	a, err := gw.Ask(ctx, q)
	if err != nil {
		return nil, err
	}
	return &mcp.ElicitResult{Action: a.Action, Content: a.Content}, nil
}

// progress shows a call's progress in its turn's live status.
func (r *toolRelay) progress(ctx context.Context, p mcp.Progress) {
	if gw := r.gw.Load(); gw != nil {
		gw.ShowProgress(ctx, p.Tool, p.Progress, p.Total)
	}
}
