package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway/approval"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/tracing"
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

// approveFunc is the turn's Approve: nil when approvals are off.
func (g *Gateway) approveFunc(eff *policy.Effective) func(string, bool) bool {
	if g.cfg.Approvals == nil {
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
	rec, err := g.pausedOn(ctx, c, m)
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
func (g *Gateway) pausedOn(ctx context.Context, c *sessions.Claim, m channels.Message) (*approval.Record, error) {
	if g.cfg.Approvals == nil || !c.Approval {
		return nil, nil // the claim saw no approval record
	}
	conv := c.Lock.Conversation()
	rec, err := g.cfg.Approvals.Get(ctx, conv)
	if err != nil || rec == nil {
		return nil, err
	}
	if rec.Item != itemID(c.Item) {
		// The message it paused was answered; the record outlived it.
		if err := g.cfg.Approvals.Drop(ctx, conv, rec.ID); err != nil {
			g.log.WarnContext(ctx, "drop a finished approval", "err", err)
		}
		return nil, nil
	}
	if rec.State != approval.Pending {
		return rec, nil
	}
	now := time.Now()
	expired, err := g.cfg.Approvals.Expire(ctx, conv, rec.ID, now)
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
func (g *Gateway) promptExpired(ctx context.Context, m channels.Message, rec *approval.Record) {
	if _, ok := g.channel(m.Channel).(channels.Prompter); !ok || rec.Prompt == nil {
		return
	}
	g.send(ctx, m, channels.Reply{Notice: true, Text: decisionText(approval.Already, rec), Decided: decision(approval.Decided, rec)})
}

// resume continues the turn rec paused, with its decision.
func (g *Gateway) resume(ctx context.Context, c *sessions.Claim, m channels.Message, rec *approval.Record) (result, error) {
	eff := g.cfg.Policy.Resolve(policy.Scope{Channel: m.Channel, Workspace: m.Workspace, Chat: m.Chat})
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
		r.stopTyping = g.startTyping(ctx, m)
	}
	set := g.skillSet(ctx, eff)
	index, _ := set.Index()
	to := m
	if r.replyTo != nil {
		to = *r.replyTo
	}
	images, history := g.resumeImages(ctx, m, eff, c.History)
	live := g.startLive(ctx, to)
	res, err := g.agent.Run(ctx, agent.TurnRequest{
		Channel: m.Channel, Workspace: m.Workspace, Chat: m.Chat, Conversation: c.Lock.Conversation(), User: m.User,
		History: c.History, SystemExtra: index, Skills: set,
		Images: images, HistoryImages: history,
		Allow: g.toolPolicy(eff), Approve: g.approveFunc(eff),
		Item: itemID(c.Item), Calls: g.store,
		Resume: &agent.Resume{State: rec.Turn, Verdict: v},
		Events: live.events(),
		Model:  eff.ModelKey(),
	})
	r.live = live
	if err != nil {
		live.discard(ctx)
		if r.stopTyping != nil {
			r.stopTyping()
		}
		g.observe(ctx, r, metrics.OutcomeError)
		return result{}, err
	}
	return g.ran(ctx, m, eff, r, res), nil
}

// ran turns the agent's result into the turn's result: the messages and
// reply, or the pause.
func (g *Gateway) ran(ctx context.Context, m channels.Message, eff *policy.Effective, r result, res agent.TurnResult) result {
	r.spent = g.spentOf(m, eff, res)
	if res.Paused != nil {
		r.pause = &pending{Paused: res.Paused, timeout: eff.ApprovalTimeout()}
		return r
	}
	if res.Failed {
		r.outcome = metrics.OutcomeError
	}
	reply := res.Reply
	r.msgs = res.Messages
	if reply != "" && !res.Failed {
		// Stored and sent alike, a live reply finished with it too.
		reply, r.msgs = g.capReply(ctx, m, eff, reply, r.msgs)
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
	g.count(ctx, r.spent)
	err := g.cfg.Approvals.Pause(ctx, c.Lock.Token(), req)
	// Whatever was shown live goes: the prompt takes its place, or the
	// message is answered again, here or elsewhere.
	r.live.discard(ctx)
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
	g.audit(ctx, "approval requested", &approval.Record{Request: req, State: approval.Pending})
	g.sendPrompt(ctx, m, req, channels.Reply{Notice: true, Text: approval.Prompt(req), Approval: &channels.Approval{
		ID: req.ID, Code: req.Code, Tool: req.Tool, Args: approval.Args(req.Args), Expires: req.Expires,
	}})
	// Look again when it expires, in case nobody decides.
	return next{retryIn: r.pause.timeout + lockMargin}
}

// sendPrompt sends the prompt of req: through a Prompter, keeping the
// reference it returns with the approval, or as any notice.
func (g *Gateway) sendPrompt(ctx context.Context, m channels.Message, req approval.Request, r channels.Reply) {
	p, ok := g.channel(m.Channel).(channels.Prompter)
	if !ok {
		g.send(ctx, m, r)
		return
	}
	ctx, span := g.cfg.Tracer.Start(ctx, "send")
	defer span.End()
	outcome := metrics.OutcomeOK
	ref, err := p.SendPrompt(ctx, m, r)
	if err != nil {
		g.log.ErrorContext(ctx, "send approval prompt", "channel", m.Channel, "err", err)
		tracing.Fail(span, err)
		outcome = metrics.OutcomeError
	}
	g.metrics.RepliesSent.WithLabelValues(m.Channel, outcome).Inc()
	if err == nil && len(ref) > 0 {
		if err := g.cfg.Approvals.SetPrompt(ctx, req.Conversation, req.ID, ref); err != nil {
			// Decisions by click still update it; an expiry cannot.
			g.log.WarnContext(ctx, "keep the approval prompt's reference", "channel", m.Channel, "err", err)
		}
	}
}

// dropApproval forgets the approval of a resumed turn once the turn is
// written.
func (g *Gateway) dropApproval(ctx context.Context, conv string, r result) {
	if r.resumed == nil {
		return
	}
	if err := g.cfg.Approvals.Drop(context.WithoutCancel(ctx), conv, r.resumed.ID); err != nil {
		// The next claim of the conversation finds it stale and drops it.
		g.log.WarnContext(ctx, "drop a finished approval", "err", err)
	}
}

// decided counts and logs a decision (or expiry) of rec.
func (g *Gateway) decided(ctx context.Context, rec *approval.Record, channel string) {
	g.metrics.ToolApprovals.WithLabelValues(channel, g.toolLabel(rec.Tool), rec.State).Inc()
	g.metrics.ToolApprovalWait.WithLabelValues(channel).Observe(rec.At.Sub(rec.Created).Seconds())
	g.audit(ctx, "approval decided", rec)
}

// toolLabel bounds the tool label to the registered tools.
func (g *Gateway) toolLabel(name string) string {
	if g.cfg.Tools != nil {
		if _, ok := g.cfg.Tools.Get(name); ok {
			return name
		}
	}
	return "(unknown)"
}

// audit logs an approval's request or decision: the tool, a digest of the
// arguments (not the arguments: they may hold what the log must not), who
// asked and who decided.
func (g *Gateway) audit(ctx context.Context, msg string, rec *approval.Record) {
	sum := sha256.Sum256([]byte(rec.Args))
	g.log.LogAttrs(ctx, slog.LevelInfo, msg, slog.String("audit", "approval"), slog.String("approval", rec.ID),
		slog.String("channel", rec.Channel), slog.String("conversation", rec.Conversation),
		slog.String("tool", rec.Tool), slog.String("args_sha256", hex.EncodeToString(sum[:])),
		slog.String("requester", rec.Requester), slog.String("approver", rec.By), slog.String("outcome", rec.State))
}

// Answers to /approve, /deny and /cancel. The refusals say nothing of
// what exists: a wrong code, another conversation's, one that was never
// issued all read the same.
const (
	noSuchApproval = "There is no pending approval with that code."
	notAnApprover  = "You can't approve this."
	nothingPending = "There is nothing waiting for approval here."
)

// approvalCommand decides /approve CODE, /deny CODE and (while an approval
// is pending) /cancel at once, in Submit: the conversation's queue waits
// for the decision, so it cannot wait in the queue. ok reports whether m
// was such a command.
func (g *Gateway) approvalCommand(ctx context.Context, m channels.Message) (ok bool, err error) {
	if g.cfg.Approvals == nil {
		return false, nil
	}
	name, args := splitCommand(strings.TrimSpace(m.Text))
	var state string
	switch name {
	case "/approve":
		state = approval.Approved
	case "/deny":
		state = approval.Denied
	case "/cancel":
		state = approval.Cancelled
	case "/show":
		state = approval.Pending // not a decision: the full arguments
	default:
		return false, nil
	}
	conv := m.ConversationKey()
	rec, err := g.cfg.Approvals.Get(ctx, conv)
	if err != nil {
		return false, err
	}
	if state == approval.Cancelled && (rec == nil || rec.State != approval.Pending) {
		return false, nil // an ordinary command, answered in turn
	}
	if rec == nil && (state == approval.Approved || state == approval.Denied) {
		// The turn may already be written (a double click, a second
		// replica's delivery of the same click): the decision reads as
		// already taken, and by whom.
		if rec, err = g.cfg.Approvals.Finished(ctx, conv); err != nil {
			return false, err
		}
	}
	if m.ID != "" {
		// A platform's re-delivery is not a second decision.
		if dup, err := g.store.Seen(ctx, "approval-command", m.Channel+":"+m.ID); err != nil || dup {
			return true, err
		}
	}
	eff := g.cfg.Policy.Resolve(policy.Scope{Channel: m.Channel, Workspace: m.Workspace, Chat: m.Chat})
	if d := eff.Access(m.User, m.Chat, m.DM); !d.Allowed && !eff.IsAdmin(m.User) {
		// Someone the access rules keep out hears nothing, not even that
		// a code is wrong.
		g.metrics.MessagesRejected.WithLabelValues(m.Channel, "access").Inc()
		return true, nil
	}
	code := strings.TrimSpace(args)
	unknown := channels.Reply{Notice: true, Text: noSuchApproval, Decided: &channels.ApprovalDecision{Outcome: channels.DecisionUnknown}}
	if state == approval.Pending {
		text := noSuchApproval
		if rec != nil && rec.State == approval.Pending && code != "" && approval.NormalCode(code) == rec.Code {
			text = "The arguments of " + approval.Args(rec.Tool) + ":\n```\n" + approval.FullArgs(rec.Args) + "\n```"
		}
		g.send(ctx, m, channels.Reply{Notice: true, Text: text})
		return true, nil
	}
	switch {
	case state != approval.Cancelled && (rec == nil || !matches(rec, code)):
		g.send(ctx, m, unknown)
		return true, nil
	case !eff.MayApprove(m.User, rec.Requester):
		g.log.InfoContext(ctx, "approval refused: not an approver", "channel", m.Channel, "approval", rec.ID, "user", m.User)
		g.send(ctx, m, channels.Reply{Notice: true, Text: notAnApprover, Decided: &channels.ApprovalDecision{
			ID: rec.ID, Code: rec.Code, Tool: approval.Args(rec.Tool), Outcome: channels.DecisionNotAllowed,
		}})
		return true, nil
	}
	if state == approval.Cancelled {
		code = ""
	}
	out, now, err := g.decide(ctx, conv, code, state, m)
	if err != nil {
		return true, err
	}
	if out == approval.Decided && len(now.ReplyTo) > 0 {
		return true, nil // the resumed turn answers this message
	}
	if out == approval.TooLate {
		// Expired: what is known of it is the record read before.
		expired := *rec
		expired.State, expired.At = approval.Expired, time.Now()
		now = &expired
	}
	g.send(ctx, m, channels.Reply{Notice: true, Text: decisionText(out, now), Decided: decision(out, now)})
	return true, nil
}

// matches reports whether code, as typed or as a button sends it, names
// rec: its short code or its id.
func matches(rec *approval.Record, code string) bool {
	c := approval.NormalCode(code)
	return c != "" && (c == rec.Code || c == rec.ID)
}

// decision is what became of rec, for an adapter that updates the prompt.
func decision(out approval.Outcome, rec *approval.Record) *channels.ApprovalDecision {
	d := &channels.ApprovalDecision{
		ID: rec.ID, Code: rec.Code, Tool: approval.Args(rec.Tool), Args: approval.Args(rec.Args), Outcome: rec.State,
		Already: out == approval.Already, By: rec.By, ByName: rec.ByName, At: rec.At, Prompt: rec.Prompt,
	}
	if out == approval.TooLate {
		d.Outcome, d.Already = channels.DecisionExpired, true
	}
	return d
}

// decide records m's user's decision and wakes the conversation for the
// turn to resume here.
func (g *Gateway) decide(ctx context.Context, conv, code, state string, m channels.Message) (approval.Outcome, *approval.Record, error) {
	var replyTo json.RawMessage
	if g.awaited(m.Channel) && state != approval.Cancelled {
		// The sender waits for one answer to this message: the resumed
		// turn's answer is it.
		replyTo, _ = json.Marshal(m)
	}
	out, rec, err := g.cfg.Approvals.Decide(ctx, conv, code, state, m.User, m.UserName, time.Now(), replyTo)
	switch {
	case errors.Is(err, approval.ErrUnknown):
		return approval.TooLate, nil, nil
	case err != nil:
		return 0, nil, err
	}
	if out == approval.Decided {
		g.decided(ctx, rec, m.Channel)
	}
	if out != approval.Already {
		g.wake(conv)
	}
	return out, rec, nil
}

// decisionText answers the person who decided.
func decisionText(out approval.Outcome, rec *approval.Record) string {
	if out == approval.TooLate || rec == nil {
		return "That approval has expired."
	}
	tool := approval.Args(rec.Tool)
	switch {
	case out == approval.Decided && rec.State == approval.Approved:
		return "Approved — running " + tool + "."
	case out == approval.Decided && rec.State == approval.Denied:
		return "Denied — " + tool + " will not run."
	case out == approval.Decided:
		return "Cancelled — " + tool + " will not run."
	case rec.State == approval.Expired:
		return "That approval has expired."
	}
	return "Already " + rec.State + " by " + approval.Args(rec.Decider()) + "."
}

// wake schedules conv now, even if it waits on a timer (the approval's
// expiry), so that a decision is acted on at once.
func (g *Gateway) wake(conv string) {
	g.mu.Lock()
	if st := g.state[conv]; st != nil && !g.closed && st.timer != nil && st.timer.Stop() {
		st.timer = nil
		if !st.queued && !st.running {
			g.enqueueLocked(conv, st)
		}
	}
	g.mu.Unlock()
	g.schedule(conv)
}
