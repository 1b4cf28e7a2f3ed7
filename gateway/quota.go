package gateway

import (
	"context"
	"log/slog"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway/quota"
	"github.com/parleyhq/parley/gateway/usage"
	"github.com/parleyhq/parley/internal/logthrottle"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/redis/go-redis/v9"
)

// quotaNotices tell a refused user why, by the limit that refused them.
// They name no numbers: the user needs to know what to do, not where the
// line is.
var quotaNotices = map[string]string{
	quota.User:      "You're sending messages faster than I can answer. Please wait a minute before sending more.",
	quota.Workspace: "I'm getting more messages from this workspace than I can answer right now. Please try again in a minute.",
	quota.Budget:    "You've used up today's share of my answers. Please try again tomorrow (the budget renews at 00:00 UTC).",
}

// accounting counts what turns use: against the quotas before a turn,
// and what it spent after, in the user's budget and the usage report. The
// gateway calls quotas and usage through it alone.
type accounting interface {
	// admit counts m against its scope's quotas; refused reports that it
	// may not reach the model, notice (maybe nil) what to answer it with.
	// awaited says that m's sender waits for an answer to each message
	// (channels.Awaited): every refusal is then answered.
	admit(ctx context.Context, m channels.Message, eff *policy.Effective, awaited bool) (notice *channels.Reply, refused bool, err error)
	// spentOf is what res cost; nil when nothing counts it.
	spentOf(m channels.Message, eff *policy.Effective, res agent.TurnResult) *spent
	// count counts s by itself.
	count(ctx context.Context, s *spent)
	// countAlong queues s's writes in the pipeline p; settle reads them.
	countAlong(ctx context.Context, s *spent, p redis.Pipeliner) (settle func(context.Context))
}

// ledger is the accounting of Config.Quotas and Config.Usage.
type ledger struct {
	quotas   *quota.Quotas // nil enforces none
	usage    *usage.Store  // nil records nothing
	metrics  *metrics.Metrics
	log      *slog.Logger
	refusals *logthrottle.Throttle
}

func subjectOf(m channels.Message) quota.Subject {
	return quota.Subject{Channel: m.Channel, Workspace: m.Workspace, User: m.User}
}

// admit counts m against the quotas of its scope. A refused message
// (refused true) returns the notice that answers it: a notice the first time in
// quota.NoticeEvery, else nothing — except when its sender is awaited,
// who is answered every time, since they wait for an answer that would
// never come; either way it never reaches the model and its turn stores
// nothing. The notice is a failed reply: the message was refused. A
// failing Redis is a storeError: the message stays queued.
func (g *ledger) admit(ctx context.Context, m channels.Message, eff *policy.Effective, awaited bool) (_ *channels.Reply, refused bool, _ error) {
	if g.quotas == nil {
		return nil, false, nil
	}
	l := eff.Limits()
	v, err := g.quotas.Check(ctx, subjectOf(m), quota.Limits{
		UserPerMinute: l.UserPerMinute, WorkspacePerMinute: l.WorkspacePerMinute, TokensPerUserDay: l.TokensPerUserDay,
	})
	if err != nil {
		return nil, false, storeError{err}
	}
	if v.Refused == "" {
		return nil, false, nil
	}
	g.metrics.QuotaRefusals.WithLabelValues(m.Channel, v.Refused).Inc()
	g.metrics.MessagesRejected.WithLabelValues(m.Channel, "quota").Inc()
	d := eff.LimitRule(v.Refused)
	if !v.Notify && !awaited {
		g.refusals.Log(ctx, g.log, slog.LevelDebug, "quota "+v.Refused, m.Channel, "message refused by a quota", "channel", m.Channel, "limit", v.Refused, "rule", d.Rule, "level", d.Level)
		return nil, true, nil
	}
	g.refusals.Log(ctx, g.log, slog.LevelInfo, "quota notice "+v.Refused, m.Channel, "message refused by a quota; the user is told", "channel", m.Channel, "limit", v.Refused,
		"rule", d.Rule, "level", d.Level, "retry_after", v.RetryAfter)
	return &channels.Reply{Notice: true, Failed: true, Text: quotaNotices[v.Refused]}, true, nil
}

// spent is what a turn's model calls cost, counted once the turn is
// done: against its user's daily budget, when one applies, and in the
// usage report, when one is kept. The reply is already made: a failure to
// count is logged, and the turn goes on.
type spent struct {
	subject quota.Subject
	tokens  int64
	budget  int64       // the user's daily budget; 0: none applies
	usage   *usage.Turn // nil: no report is kept
}

// spentOf is what res cost; nil when nothing counts it.
func (g *ledger) spentOf(m channels.Message, eff *policy.Effective, res agent.TurnResult) *spent {
	s := &spent{subject: subjectOf(m), tokens: int64(res.Usage.Prompt) + int64(res.Usage.Completion)}
	if g.quotas != nil {
		s.budget = max(eff.Limits().TokensPerUserDay, 0)
	}
	if g.usage != nil {
		s.usage = &usage.Turn{
			Channel: m.Channel, Workspace: m.Workspace, Chat: m.Chat, User: m.User, Model: res.Model,
			Prompt: res.Usage.Prompt, Completion: res.Usage.Completion, Cached: res.Usage.Cached,
		}
	}
	if s.budget == 0 && s.usage == nil {
		return nil
	}
	return s
}

// count counts s by itself: for a turn that writes no completion for it
// to ride with (one that pauses for an approval).
func (g *ledger) count(ctx context.Context, s *spent) {
	if s == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if s.budget > 0 {
		total, err := g.quotas.Spend(ctx, s.subject, s.tokens)
		g.spentBudget(ctx, s, total, err)
	}
	if s.usage != nil {
		g.recorded(ctx, s, g.usage.Record(ctx, *s.usage))
	}
}

// countAlong queues s's writes in p, the pipeline of the turn's
// completion, so that they cost no round trip of their own; settle, called
// once that has run, reads how they went.
func (g *ledger) countAlong(ctx context.Context, s *spent, p redis.Pipeliner) (settle func(context.Context)) {
	var spend func(context.Context) (int64, error)
	var record func(context.Context) error
	if s.budget > 0 {
		spend = g.quotas.Queue(ctx, p, s.subject, s.tokens)
	}
	if s.usage != nil {
		record = g.usage.Queue(ctx, p, *s.usage)
	}
	return func(ctx context.Context) {
		if spend != nil {
			total, err := spend(ctx)
			g.spentBudget(ctx, s, total, err)
		}
		if record != nil {
			g.recorded(ctx, s, record(ctx))
		}
	}
}

func (g *ledger) spentBudget(ctx context.Context, s *spent, total int64, err error) {
	if err != nil {
		g.log.WarnContext(ctx, "could not count a turn's tokens against the user's budget", "channel", s.subject.Channel, "err", err)
		return
	}
	g.metrics.BudgetUsed.WithLabelValues(s.subject.Channel).Observe(float64(total) / float64(s.budget))
}

func (g *ledger) recorded(ctx context.Context, s *spent, err error) {
	if err != nil {
		g.log.WarnContext(ctx, "could not record a turn's tokens for the usage report", "channel", s.subject.Channel, "err", err)
	}
}
