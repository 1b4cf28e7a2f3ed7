package commands

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway/approval"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
)

// Seen records an id and reports whether it was seen before
// (sessions.Store).
type Seen interface {
	Seen(ctx context.Context, scope, id string) (bool, error)
}

// Decider decides /approve CODE, /deny CODE, /show CODE and (while an
// approval is pending) /cancel when they arrive, before any queue: the
// conversation's queue waits for the decision. The funcs are the
// gateway's; none may be nil.
type Decider struct {
	// Approvals is nil when no call waits for approval: Decide then
	// decides nothing.
	Approvals *approval.Store
	Seen      Seen
	// Resolve is the policy of m's scope.
	Resolve func(m channels.Message) *policy.Effective
	// Send answers m with r, as any notice.
	Send func(ctx context.Context, m channels.Message, r channels.Reply)
	// Awaited reports whether the sender on channel waits for an answer
	// to each message (channels.Awaited).
	Awaited func(channel string) bool
	// Decided counts and logs a decision.
	Decided func(ctx context.Context, rec *approval.Record, channel string)
	// Wake serves the conversation conv now, so that a decision is acted
	// on at once.
	Wake    func(conv string)
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

// decisions are the commands Decide takes, by the state each asks for.
var decisions = map[string]string{
	"/approve": approval.Approved,
	"/deny":    approval.Denied,
	"/cancel":  approval.Cancelled,
	"/show":    approval.Pending, // not a decision: the full arguments
}

// Decide decides /approve CODE, /deny CODE and (while an approval
// is pending) /cancel at once, in Submit: the conversation's queue waits
// for the decision, so it cannot wait in the queue. ok reports whether m
// was such a command.
func (g *Decider) Decide(ctx context.Context, m channels.Message) (ok bool, err error) {
	if g.Approvals == nil {
		return false, nil
	}
	name, args := Split(strings.TrimSpace(m.Text))
	state, ok := decisions[name]
	if !ok {
		return false, nil
	}
	conv := m.ConversationKey()
	rec, err := g.Approvals.Get(ctx, conv)
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
		if rec, err = g.Approvals.Finished(ctx, conv); err != nil {
			return false, err
		}
	}
	if m.ID != "" {
		// A platform's re-delivery is not a second decision.
		if dup, err := g.Seen.Seen(ctx, "approval-command", m.Channel+":"+m.ID); err != nil || dup {
			return true, err
		}
	}
	eff := g.Resolve(m)
	if d := eff.Access(m.User, m.Chat, m.DM); !d.Allowed && !eff.IsAdmin(m.User) {
		// Someone the access rules keep out hears nothing, not even that
		// a code is wrong.
		g.Metrics.MessagesRejected.WithLabelValues(m.Channel, "access").Inc()
		return true, nil
	}
	code := strings.TrimSpace(args)
	unknown := channels.Reply{Notice: true, Text: NoSuchApproval, Decided: &channels.ApprovalDecision{Outcome: channels.DecisionUnknown}}
	if state == approval.Pending {
		text := NoSuchApproval
		if rec != nil && rec.State == approval.Pending && code != "" && approval.NormalCode(code) == rec.Code {
			text = "The arguments of " + approval.Args(rec.Tool) + ":\n```\n" + approval.FullArgs(rec.Args) + "\n```"
		}
		g.Send(ctx, m, channels.Reply{Notice: true, Text: text})
		return true, nil
	}
	switch {
	case state != approval.Cancelled && (rec == nil || !matches(rec, code)):
		g.Send(ctx, m, unknown)
		return true, nil
	case !eff.MayApprove(m.User, rec.Requester):
		g.Log.InfoContext(ctx, "approval refused: not an approver", "channel", m.Channel, "approval", rec.ID, "user", m.User)
		g.Send(ctx, m, channels.Reply{Notice: true, Text: NotAnApprover, Decided: &channels.ApprovalDecision{
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
	g.Send(ctx, m, channels.Reply{Notice: true, Text: DecisionText(out, now), Decided: Decision(out, now)})
	return true, nil
}

// matches reports whether code, as typed or as a button sends it, names
// rec: its short code or its id.
func matches(rec *approval.Record, code string) bool {
	c := approval.NormalCode(code)
	return c != "" && (c == rec.Code || c == rec.ID)
}

// Decision is what became of rec, for an adapter that updates the prompt.
func Decision(out approval.Outcome, rec *approval.Record) *channels.ApprovalDecision {
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
func (g *Decider) decide(ctx context.Context, conv, code, state string, m channels.Message) (approval.Outcome, *approval.Record, error) {
	var replyTo json.RawMessage
	if g.Awaited(m.Channel) && state != approval.Cancelled {
		// The sender waits for one answer to this message: the resumed
		// turn's answer is it.
		replyTo, _ = json.Marshal(m)
	}
	out, rec, err := g.Approvals.Decide(ctx, conv, code, state, m.User, m.UserName, time.Now(), replyTo)
	switch {
	case errors.Is(err, approval.ErrUnknown):
		return approval.TooLate, nil, nil
	case err != nil:
		return 0, nil, err
	}
	if out == approval.Decided {
		g.Decided(ctx, rec, m.Channel)
	}
	if out != approval.Already {
		g.Wake(conv)
	}
	return out, rec, nil
}

// DecisionText answers the person who decided.
func DecisionText(out approval.Outcome, rec *approval.Record) string {
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
