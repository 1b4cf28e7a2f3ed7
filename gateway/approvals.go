package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/audit"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway/approval"
	"github.com/parleyhq/parley/gateway/commands"
	"github.com/parleyhq/parley/gateway/delivery"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
)

// Approvals: a turn whose model calls a tool the policy wants approved
// pauses (approval.Store.Pause hands the conversation's lock to the
// approval, so the conversation's other messages wait behind it), and the
// worker is free. /approve, /deny and /cancel are decided in Submit, not
// queued, since the queue waits for them; the replica that decides wakes
// the conversation, and whichever replica claims it resumes the turn (see
// answer). Nobody deciding lets the approval's lock expire: the replica
// that paused tries again then, and the sweep finds it if that replica is
// gone.

// pending is a turn that paused for approval.
type pending struct {
	*agent.Paused
	timeout time.Duration
}

// approvals keeps the turns that paused for approval, and their prompts.
type approvals struct {
	store   *approval.Store // nil: approvals are off
	tools   *agent.Registry
	ledger  audit.Recorder // nil: no audit ledger
	metrics *metrics.Metrics
	log     *slog.Logger
	route   func(m channels.Message) delivery.Route
}

// approveFunc is the turn's Approve: nil when approvals are off.
func (g *approvals) approveFunc(eff *policy.Effective) func(string, bool) bool {
	if g.store == nil {
		return nil
	}
	return func(tool string, writes bool) bool {
		needed, _ := eff.Approval(tool, writes)
		return needed
	}
}

// answer serves a claimed message: it resumes the turn that paused on it,
// or handles it afresh.
func (g *Gateway) answer(ctx context.Context, c *sessions.Claim, m channels.Message) (result, error) {
	rec, err := g.approvals.pausedOn(ctx, c, m)
	if err != nil {
		return result{}, storeError{err}
	}
	if rec == nil {
		return g.handle(ctx, c, m)
	}
	return g.resume(ctx, c, m, rec)
}

// pausedOn returns the decided approval of the message c claimed, marking
// one nobody decided in time expired; nil when the message did not pause.
func (g *approvals) pausedOn(ctx context.Context, c *sessions.Claim, m channels.Message) (*approval.Record, error) {
	if g.store == nil || !c.Approval {
		return nil, nil // the claim saw no approval record
	}
	conv := c.Lock.Conversation()
	rec, err := g.store.Get(ctx, conv)
	if err != nil || rec == nil {
		return nil, err
	}
	if rec.Item != itemID(c.Item) {
		// The message it paused was answered; the record outlived it.
		if err := g.store.Drop(ctx, conv, rec.ID); err != nil {
			g.log.WarnContext(ctx, "drop a finished approval", "err", err)
		}
		return nil, nil
	}
	if rec.State != approval.Pending {
		return rec, nil
	}
	now := time.Now()
	expired, err := g.store.Expire(ctx, conv, rec.ID, now)
	if err != nil {
		return nil, err
	}
	if expired {
		rec.State, rec.At = approval.Expired, now
		g.decided(ctx, rec, m.Channel)
		g.promptExpired(ctx, m, rec)
	}
	return rec, nil
}

// promptExpired updates the prompt of rec, which nobody decided in time,
// where the channel can: only a Prompter whose prompt is known is sent
// this, since elsewhere the model's answer that follows says it.
func (g *approvals) promptExpired(ctx context.Context, m channels.Message, rec *approval.Record) {
	r := g.route(m)
	if !r.Prompts() || rec.Prompt == nil {
		return
	}
	r.Send(ctx, channels.Reply{Notice: true, Text: commands.DecisionText(approval.Already, rec), Decided: commands.Decision(approval.Decided, rec)})
}

// resume continues the turn rec paused, with its decision.
func (g *Gateway) resume(ctx context.Context, c *sessions.Claim, m channels.Message, rec *approval.Record) (result, error) {
	eff := g.resolve(m)
	var v agent.Verdict
	switch rec.State {
	case approval.Approved:
		v.Approved = true
	case approval.Denied:
		v.Refusal = "denied by " + rec.Decider()
	case approval.Cancelled:
		v.Stop = true
	default:
		v.Refusal = "approval expired (nobody approved it in time)"
	}
	v.By = rec.Decider()
	r := result{channel: m.Channel, turn: true, start: time.Now(), outcome: metrics.OutcomeOK, resumed: rec}
	if len(rec.ReplyTo) > 0 {
		var to channels.Message
		if json.Unmarshal(rec.ReplyTo, &to) == nil {
			r.replyTo = &to
		}
	}
	g.metrics.TurnsInFlight.Inc()
	defer g.metrics.TurnsInFlight.Dec()
	if !v.Stop {
		r.stopTyping = startTyping(ctx, g.capsOf(m), m, g.cfg.TypingDelay)
	}
	set := g.skills.Set(ctx, eff)
	index, _ := set.Index()
	to := m
	if r.replyTo != nil {
		to = *r.replyTo
	}
	images, history := g.att.resumeImages(ctx, g.capsOf(m).AttachmentFetcher, m, eff, c.History)
	r.route = g.route(to)
	live := r.route.StartLive(ctx, c)
	if r.stopTyping != nil {
		live.OnVisible(r.stopTyping)
	}
	res, err := g.agent.Run(ctx, agent.TurnRequest{
		Channel: m.Channel, Workspace: m.Workspace, Chat: m.Chat, Conversation: c.Lock.Conversation(), User: m.User,
		History: c.History, SystemExtra: index, Persona: persona(eff), Skills: set,
		Images: images, HistoryImages: history,
		Allow: g.allowTools(eff, r.route), Approve: g.approvals.approveFunc(eff), Files: g.fileKeeper(),
		Item: itemID(c.Item), Calls: g.store, Audit: g.cfg.Audit,
		Resume: &agent.Resume{State: rec.Turn, Verdict: v},
		Events: live.Events(),
		Model:  eff.ModelKey(),
	})
	r.live = live
	if err != nil {
		live.Discard(ctx)
		if r.stopTyping != nil {
			r.stopTyping()
		}
		observe(ctx, g.metrics, r, metrics.OutcomeError)
		return result{}, err
	}
	return g.ran(ctx, m, eff, r, res), nil
}

// ran turns the agent's result into the turn's result: the messages and
// reply, or the pause.
func (g *Gateway) ran(ctx context.Context, m channels.Message, eff *policy.Effective, r result, res agent.TurnResult) result {
	r.spent = g.acct.spentOf(m, eff, res)
	r.tokens = res.Usage.Prompt + res.Usage.Completion
	if res.Paused != nil {
		r.pause = &pending{Paused: res.Paused, timeout: eff.ApprovalTimeout()}
		return r
	}
	if res.Failed {
		r.outcome = metrics.OutcomeError
	}
	reply := res.Reply
	r.msgs = res.Messages
	r.files = res.Files
	if reply != "" && !res.Failed {
		// Stored and sent alike, a live reply finished with it too.
		reply, r.msgs = capReply(ctx, g.log, r.route, eff, reply, r.msgs)
	}
	if reply != "" || res.Failed {
		r.reply = &channels.Reply{Text: reply, Failed: res.Failed}
	}
	return r
}

// pauseTurn stores the paused turn and hands the conversation to its
// approval, then asks for the decision. The message stays queued.
func (g *Gateway) pauseTurn(ctx context.Context, c *sessions.Claim, q queued, r result) next {
	if r.stopTyping != nil {
		defer r.stopTyping()
	}
	m := q.Msg
	req := approval.NewRequest(time.Now(), r.pause.timeout)
	req.Conversation, req.Item, req.Channel = c.Lock.Conversation(), itemID(c.Item), m.Channel
	req.Tool, req.Args, req.Turn = r.pause.Call.Name, r.pause.Call.Arguments, r.pause.State
	req.Requester, req.RequesterName = m.User, m.UserName
	g.acct.count(ctx, r.spent)
	err := g.cfg.Approvals.Pause(ctx, c.Lock.Token(), req)
	// Whatever was shown live goes: the prompt takes its place, or the
	// message is answered again, here or elsewhere.
	r.live.Discard(ctx)
	switch {
	case errors.Is(err, approval.ErrLockLost):
		g.log.WarnContext(ctx, "conversation lock lost before the turn could pause; its next holder answers the message", "channel", m.Channel)
		g.release(c.Lock)
		return next{}
	case err != nil:
		g.log.WarnContext(ctx, "redis failed pausing a turn for approval; the message stays queued", "channel", m.Channel, "err", err)
		g.release(c.Lock)
		g.redisFailed()
		return next{failed: true}
	}
	c.Lock.Detach() // the lock is the approval's now
	g.writeRoomNow(ctx, c.Lock.Conversation(), r.room)
	g.approvals.audit(ctx, "approval requested", &approval.Record{Request: req, State: approval.Pending})
	rt := r.route
	if !rt.Chosen() || r.replyTo != nil {
		rt = g.route(m) // the prompt answers the paused message
	}
	g.approvals.prompt(ctx, rt, req, channels.Reply{Notice: true, Text: approval.Prompt(req), Approval: &channels.Approval{
		ID: req.ID, Code: req.Code, Tool: req.Tool, Args: approval.Args(req.Args), Expires: req.Expires,
	}})
	// Look again when it expires, in case nobody decides.
	return next{retryIn: r.pause.timeout + lockMargin}
}

// prompt sends the prompt of req: through a Prompter, keeping the
// reference it returns with the approval, or as any notice.
func (g *approvals) prompt(ctx context.Context, rt delivery.Route, req approval.Request, r channels.Reply) {
	ref := rt.Prompt(ctx, r)
	if len(ref) > 0 {
		if err := g.store.SetPrompt(ctx, req.Conversation, req.ID, ref); err != nil {
			// Decisions by click still update it; an expiry cannot.
			g.log.WarnContext(ctx, "keep the approval prompt's reference", "channel", req.Channel, "err", err)
		}
	}
}

// drop forgets the approval of a resumed turn once the turn is
// written.
func (g *approvals) drop(ctx context.Context, conv string, r result) {
	if r.resumed == nil {
		return
	}
	if err := g.store.Drop(context.WithoutCancel(ctx), conv, r.resumed.ID); err != nil {
		// The next claim of the conversation finds it stale and drops it.
		g.log.WarnContext(ctx, "drop a finished approval", "err", err)
	}
}

// decided counts and logs a decision (or expiry) of rec.
func (g *approvals) decided(ctx context.Context, rec *approval.Record, channel string) {
	g.metrics.ToolApprovals.WithLabelValues(channel, g.toolLabel(rec.Tool), rec.State).Inc()
	g.metrics.ToolApprovalWait.WithLabelValues(channel).Observe(rec.At.Sub(rec.Created).Seconds())
	g.audit(ctx, "approval decided", rec)
}

// toolLabel bounds the tool label to the registered tools.
func (g *approvals) toolLabel(name string) string {
	if g.tools != nil {
		if _, ok := g.tools.Get(name); ok {
			return name
		}
	}
	return "(unknown)"
}

// audit logs an approval's request or decision and records it in the
// audit ledger: the tool, a digest of the arguments (not the arguments:
// they may hold what the log must not), who asked and who decided.
func (g *approvals) audit(ctx context.Context, msg string, rec *approval.Record) {
	sum := sha256.Sum256([]byte(rec.Args))
	g.log.LogAttrs(ctx, slog.LevelInfo, msg, slog.String("audit", "approval"), slog.String("approval", rec.ID),
		slog.String("channel", rec.Channel), slog.String("conversation", sessions.ShownKey(rec.Conversation)),
		slog.String("tool", rec.Tool), slog.String("args_sha256", hex.EncodeToString(sum[:])),
		slog.String("requester", rec.Requester), slog.String("approver", rec.By), slog.String("outcome", rec.State))
	if g.ledger == nil {
		return
	}
	class := "read"
	if g.tools != nil {
		if t, ok := g.tools.Get(rec.Tool); ok && t.Writes() {
			class = "write"
		}
	}
	// The ledger logs what it cannot keep; the decision stands either way.
	_ = g.ledger.Record(ctx, audit.Entry{Kind: audit.KindApproval, Action: msg, Channel: rec.Channel, Conversation: rec.Conversation,
		User: rec.Requester, Tool: rec.Tool, Class: class, Args: rec.Args, Approver: rec.By, Target: rec.Code, Outcome: rec.State})
}
