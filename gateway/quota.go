package gateway

import (
	"context"
	"log/slog"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway/quota"
	"github.com/parleyhq/parley/gateway/usage"
	"github.com/parleyhq/parley/policy"
)

// quotaNotices tell a refused user why, by the limit that refused them.
// They name no numbers: the user needs to know what to do, not where the
// line is.
var quotaNotices = map[string]string{
	quota.User:      "You're sending messages faster than I can answer. Please wait a minute before sending more.",
	quota.Workspace: "I'm getting more messages from this workspace than I can answer right now. Please try again in a minute.",
	quota.Budget:    "You've used up today's share of my answers. Please try again tomorrow (the budget renews at 00:00 UTC).",
}

func subjectOf(m channels.Message) quota.Subject {
	return quota.Subject{Channel: m.Channel, Workspace: m.Workspace, User: m.User}
}

// admit counts m against the quotas of its scope. A refused message
// (refused true) returns the result that answers it: a notice the first time in
// quota.NoticeEvery, else nothing; either way it never reaches the model
// and its turn stores nothing. A failing Redis is a storeError: the
// message stays queued.
func (g *Gateway) admit(ctx context.Context, m channels.Message, eff *policy.Effective) (_ result, refused bool, _ error) {
	if g.cfg.Quotas == nil {
		return result{}, false, nil
	}
	l := eff.Limits()
	v, err := g.cfg.Quotas.Check(ctx, subjectOf(m), quota.Limits{
		UserPerMinute: l.UserPerMinute, WorkspacePerMinute: l.WorkspacePerMinute, TokensPerUserDay: l.TokensPerUserDay,
	})
	if err != nil {
		return result{}, false, storeError{err}
	}
	if v.Refused == "" {
		return result{}, false, nil
	}
	g.metrics.QuotaRefusals.WithLabelValues(m.Channel, v.Refused).Inc()
	g.metrics.MessagesRejected.WithLabelValues(m.Channel, "quota").Inc()
	d := eff.LimitRule(v.Refused)
	if !v.Notify {
		g.refusals.Log(ctx, g.log, slog.LevelDebug, "quota "+v.Refused, m.Channel, "message refused by a quota", "channel", m.Channel, "limit", v.Refused, "rule", d.Rule, "level", d.Level)
		return result{}, true, nil
	}
	g.refusals.Log(ctx, g.log, slog.LevelInfo, "quota notice "+v.Refused, m.Channel, "message refused by a quota; the user is told", "channel", m.Channel, "limit", v.Refused,
		"rule", d.Rule, "level", d.Level, "retry_after", v.RetryAfter)
	return result{reply: &channels.Reply{Notice: true, Text: quotaNotices[v.Refused]}}, true, nil
}

// spend counts a turn's tokens against its user's daily budget, when one
// applies. The reply is already made: a failure to count is logged, and
// the turn goes on.
func (g *Gateway) spend(ctx context.Context, m channels.Message, eff *policy.Effective, u agent.Usage) {
	budget := eff.Limits().TokensPerUserDay
	if g.cfg.Quotas == nil || budget <= 0 {
		return
	}
	total, err := g.cfg.Quotas.Spend(context.WithoutCancel(ctx), subjectOf(m), int64(u.Prompt)+int64(u.Completion))
	if err != nil {
		g.log.WarnContext(ctx, "could not count a turn's tokens against the user's budget", "channel", m.Channel, "err", err)
		return
	}
	g.metrics.BudgetUsed.WithLabelValues(m.Channel).Observe(float64(total) / float64(budget))
}

// usageOf is what a turn spent, for the usage report; nil when there is
// no report. It is sent with the turn's completion (see complete), or by
// itself when the turn pauses instead.
func (g *Gateway) usageOf(m channels.Message, res agent.TurnResult) *usage.Turn {
	if g.cfg.Usage == nil {
		return nil
	}
	return &usage.Turn{
		Channel: m.Channel, Workspace: m.Workspace, Chat: m.Chat, User: m.User, Model: res.Model,
		Prompt: res.Usage.Prompt, Completion: res.Usage.Completion, Cached: res.Usage.Cached,
	}
}

// recordUsage adds a turn's tokens to the usage report by itself. The
// reply is already made: a failure to record is logged, and the turn goes
// on.
func (g *Gateway) recordUsage(ctx context.Context, t *usage.Turn) {
	if t == nil {
		return
	}
	if err := g.cfg.Usage.Record(context.WithoutCancel(ctx), *t); err != nil {
		g.usageFailed(ctx, t, err)
	}
}

func (g *Gateway) usageFailed(ctx context.Context, t *usage.Turn, err error) {
	g.log.WarnContext(ctx, "could not record a turn's tokens for the usage report", "channel", t.Channel, "err", err)
}
