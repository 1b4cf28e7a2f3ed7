package gateway

import (
	"context"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/gateway/delivery"
	"github.com/parleyhq/parley/gateway/outbox"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
)

// fileKeeper is the turn's keeper of its tools' files; nil (no
// interface holding a nil pointer) when the gateway keeps none.
func (g *Gateway) fileKeeper() agent.FileKeeper {
	if g.cfg.Files == nil {
		return nil
	}
	return g.cfg.Files
}

// allowTools is the tool policy of a turn answered through rt: the
// policy's decision on each tool, and for a tool of the class send
// (send_file) also whether files can go out at all — kept by this
// gateway, and, unless a level sets files.send, taken natively by the
// chat (a WeChat personal account, an Official Account's passive reply
// take none).
func (g *Gateway) allowTools(eff *policy.Effective, rt delivery.Route) func(string) bool {
	allow := g.skills.toolPolicy(eff)
	_, set := eff.FilesSend()
	sendable := g.cfg.Files != nil && (set || rt.CanSendFiles())
	return func(name string) bool {
		if !sendable && g.cfg.Tools != nil {
			if t, ok := g.cfg.Tools.Get(name); ok && agent.Sends(t) {
				return false
			}
		}
		return allow(name)
	}
}

// sendFiles sends the files a committed turn's answer names, after the
// answer, through rt: each keyed by the turn's queued item and its id, the
// same on every replica and every try, so none goes twice.
func (g *Gateway) sendFiles(ctx context.Context, rt delivery.Route, c *sessions.Claim, files []agent.Outgoing) {
	conv := c.Lock.Conversation()
	item := itemID(c.Item)
	for _, f := range files {
		rt.SendFile(ctx, item+"."+f.ID, outbox.FileRef{Conversation: conv, ID: f.ID, Caption: f.Caption})
	}
}
