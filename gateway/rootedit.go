package gateway

import (
	"context"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/triggers"
)

// The root post of an alert group's thread shows the group's state: when
// a work resolves the group (or it fires again after it was resolved),
// the root is edited to the work's RootText. The edit is work of its own,
// queued on the chat behind the one that asked for it, so that the reply
// in the thread never waits for it; it is served under the chat's lock
// (the group's edits in order), tried again like a root post while the
// platform may yet take it, and logged and counted when it is given up.

// queueRootEdit queues the edit of root to w's RootText, on a platform
// that edits posts; elsewhere there is nothing to queue.
func (g *Gateway) queueRootEdit(ctx context.Context, w triggers.Work, root string) error {
	if w.RootText == "" || g.caps(channels.AdapterKey(w.To.Platform, w.To.Account)).Editor == nil {
		return nil
	}
	edit := triggers.Work{ID: w.ID + ":root", Trigger: w.Trigger, To: w.To, Answer: triggers.AnswerPost, Text: w.RootText,
		Group: w.Group, EditRoot: root}
	return g.queueWork(ctx, edit)
}

// editRoot makes the edit q carries under the chat's lock.
func (g *Gateway) editRoot(ctx context.Context, c *sessions.Claim, q queued) next {
	m, w := q.Msg, *q.Work
	caps := g.capsOf(m)
	p := caps.PosterOf(m)
	if caps.Editor == nil || p == nil {
		return g.finish(ctx, c, q, result{}) // the platform no longer edits
	}
	parts := p.Parts(m, channels.Reply{Text: w.Text})
	if len(parts) == 0 {
		return g.finish(ctx, c, q, result{})
	}
	// The root was the first part of its text: so is its edit.
	err := caps.Editor.Edit(ctx, m, w.EditRoot, parts[0])
	if err == nil {
		g.metrics.Deliveries.WithLabelValues(m.Channel, metrics.DeliverySent).Inc()
		return g.finish(ctx, c, q, result{})
	}
	again, after := channels.Retryable(err)
	if again && time.Since(m.Received) < g.workMaxAge() {
		g.metrics.Deliveries.WithLabelValues(m.Channel, metrics.DeliveryRetried).Inc()
		g.log.WarnContext(ctx, "cannot edit an alert group's root post; trying again", "trigger", w.Trigger, "channel", m.Channel, "err", err)
		g.release(c.Lock)
		return next{retryIn: min(max(after, g.cfg.RetryMax), workRetryMax)}
	}
	g.metrics.Deliveries.WithLabelValues(m.Channel, metrics.DeliveryFailed).Inc()
	g.log.ErrorContext(ctx, "cannot edit an alert group's root post; it keeps its text", "trigger", w.Trigger, "channel", m.Channel,
		"retryable", again, "err", err)
	return g.finish(ctx, c, q, result{})
}
