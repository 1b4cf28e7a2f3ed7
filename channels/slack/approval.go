package slack

import (
	"context"
	"fmt"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/internal/ident"
)

// Approval prompts are Block Kit messages: the call (tool and arguments,
// which the gateway has already made inert: no backtick, '<', '>', '@' or
// '&' is left in them, so they can neither close the code block nor
// mention anyone), Approve and Deny buttons, and when it expires. A button
// carries the approval's id and nothing else; what a click may do is
// decided by the gateway (see interactions.go). Once decided, the prompt
// is updated in place: the same call, who decided and when, no buttons.

// Block and action ids of an approval prompt.
const (
	ApprovalBlockID = "parley_approval"
	ActionApprove   = "parley_approve"
	ActionDeny      = "parley_deny"
)

// Prompt reference keys: what SendPrompt returns and Send reads back from
// channels.ApprovalDecision.Prompt.
const (
	promptChannel = "channel"
	promptTS      = "ts"
)

var _ channels.Prompter = (*Adapter)(nil)

// SendPrompt implements channels.Prompter: r (its Approval set) is posted
// as a Block Kit message with Approve and Deny buttons into the thread of
// m, and the message's channel and ts are returned so that the prompt can
// be updated once decided. A slash command's conversation gets it
// ephemerally through the response_url; it can only be updated from a
// click then, and nil is returned.
func (a *Adapter) SendPrompt(ctx context.Context, m channels.Message, r channels.Reply) (map[string]string, error) {
	if r.Approval == nil {
		return nil, a.Send(ctx, m, r)
	}
	method, ts, err := a.postBlocks(ctx, m, promptFallback(r.Approval), promptBlocks(r.Approval))
	if err != nil {
		return nil, fmt.Errorf("slack: approval prompt: %w", err)
	}
	if method == "response_url" || ts == "" {
		return nil, nil
	}
	return map[string]string{promptChannel: m.Chat, promptTS: ts}, nil
}

// postBlocks posts a Block Kit message (with fallback as its
// notification text) into m's thread, or ephemerally to a slash command's
// response_url; it returns the method used and the message's ts (none
// for a response_url).
func (a *Adapter) postBlocks(ctx context.Context, m channels.Message, fallback string, blocks []slackapi.Block) (method, ts string, err error) {
	opts := []slackapi.MsgOption{
		slackapi.MsgOptionText(fallback, false),
		slackapi.MsgOptionBlocks(blocks...),
		slackapi.MsgOptionDisableLinkUnfurl(),
	}
	method = "chat.postMessage"
	if u := m.Meta[MetaResponseURL]; u != "" {
		method = "response_url"
		opts = append(opts, slackapi.MsgOptionResponseURL(u, slackapi.ResponseTypeEphemeral))
	} else if t := m.Meta[MetaThreadTS]; t != "" {
		opts = append(opts, slackapi.MsgOptionTS(t))
	}
	err = a.call(ctx, method, a.opts.MaxAttempts, func(ctx context.Context) error {
		var err error
		_, ts, err = a.api.PostMessageContext(ctx, m.Chat, opts...)
		return err
	})
	return method, ts, err
}

// promptFallback is the text of a prompt where blocks are not shown (the
// notification).
func promptFallback(ap *channels.Approval) string {
	return "Approval needed to run " + ap.Tool + " (code " + ap.Code + ")"
}

// callBlock shows the call: the tool and its arguments in a code block.
func callBlock(headline, tool, args string) slackapi.Block {
	text := headline + " `" + tool + "` with:\n```\n" + args + "\n```"
	return slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, text, false, false), nil, nil)
}

// promptBlocks is the prompt: the call, the buttons, when it expires and
// the codes to type instead.
func promptBlocks(ap *channels.Approval) []slackapi.Block {
	approve := slackapi.NewButtonBlockElement(ActionApprove, ap.ID, slackapi.NewTextBlockObject(slackapi.PlainTextType, "Approve", false, false))
	approve.Style = slackapi.StylePrimary
	deny := slackapi.NewButtonBlockElement(ActionDeny, ap.ID, slackapi.NewTextBlockObject(slackapi.PlainTextType, "Deny", false, false))
	deny.Style = slackapi.StyleDanger
	note := "Expires " + slackDate(ap.Expires) + ". Or reply `/approve " + ap.Code + "` or `/deny " + ap.Code + "`"
	if strings.Contains(ap.Args, "more characters not shown") {
		note += "; `/show " + ap.Code + "` shows the arguments in full"
	}
	return []slackapi.Block{
		callBlock(":raised_hand: *Approval needed*: I'd like to run", ap.Tool, ap.Args),
		slackapi.NewActionBlock(ApprovalBlockID, approve, deny),
		slackapi.NewContextBlock("", slackapi.NewTextBlockObject(slackapi.MarkdownType, note+".", false, false)),
	}
}

// decidedBlocks is the prompt once decided: the call and what became of
// it, without buttons.
func decidedBlocks(d *channels.ApprovalDecision) []slackapi.Block {
	return []slackapi.Block{
		callBlock("I asked to run", d.Tool, d.Args),
		slackapi.NewContextBlock("", slackapi.NewTextBlockObject(slackapi.MarkdownType, decidedLine(d), false, false)),
	}
}

// decidedLine says what became of the approval, by whom and when.
func decidedLine(d *channels.ApprovalDecision) string {
	var line string
	switch d.Outcome {
	case channels.DecisionApproved:
		line = ":white_check_mark: *Approved* by " + decider(d)
	case channels.DecisionDenied:
		line = ":no_entry_sign: *Denied* by " + decider(d)
	case channels.DecisionCancelled:
		line = ":heavy_multiplication_x: *Cancelled* by " + decider(d)
	default:
		line = ":hourglass: *Expired*: nobody decided in time"
	}
	if !d.At.IsZero() {
		line += ", " + slackDate(d.At)
	}
	return line
}

// isUserID says whether id looks like a Slack user id: U or W and 1–20
// capitals and digits.
func isUserID(id string) bool { return ident.Led(id, userIDFirst, userIDRest, 1, 20) }

var userIDFirst, userIDRest = ident.Of("UW"), ident.Of("A-Z0-9")

// decider names who decided: their user id rendered by Slack, or the name
// the gateway knows, escaped.
func decider(d *channels.ApprovalDecision) string {
	switch {
	case isUserID(d.By):
		return "<@" + d.By + ">"
	case d.ByName != "":
		return escaper.Replace(d.ByName)
	case d.By != "":
		return escaper.Replace(d.By)
	}
	return "someone"
}

// slackDate is t as Slack shows a date in each reader's time zone, with
// UTC as the fallback text.
func slackDate(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} at {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
}

// sendDecided answers a decision (typed or clicked) or an expiry: the
// prompt is updated in place when it ends the approval; a refusal, or a
// decision that came too late, is told to its sender alone (the click's
// response_url, or an ephemeral message in the thread); a typed decision
// that counted is answered in the thread as before.
func (a *Adapter) sendDecided(ctx context.Context, m channels.Message, r channels.Reply) error {
	d := r.Decided
	click := m.Meta[metaClick] != ""
	updated := false
	if d.Final() {
		ok, err := a.updatePrompt(ctx, m, d)
		if err != nil {
			a.log.Warn("could not update an approval prompt", "err", err)
		}
		updated = ok
	}
	switch {
	case click && d.Final() && !d.Already && updated:
		return nil // the prompt says it
	case !click && d.Outcome == channels.DecisionExpired && !d.Already:
		return nil // an expiry: the model's answer follows
	case !click && (!d.Final() || d.Already) && m.User != "" && m.Meta[MetaResponseURL] == "":
		// A typed refusal, or a typed decision that came too late: to
		// its sender alone, as for a click.
		err := a.call(ctx, "chat.postEphemeral", a.opts.MaxAttempts, func(ctx context.Context) error {
			opts := []slackapi.MsgOption{slackapi.MsgOptionText(ToMrkdwn(r.Text, false), false)}
			if ts := m.Meta[MetaThreadTS]; ts != "" {
				opts = append(opts, slackapi.MsgOptionTS(ts))
			}
			_, err := a.api.PostEphemeralContext(ctx, m.Chat, m.User, opts...)
			return err
		})
		if err == nil {
			return nil
		}
		a.log.Warn("could not answer an approval command ephemerally; answering in the thread", "err", err)
	}
	// To the clicker alone when it was a click (its response_url), in
	// the thread when typed.
	r.Decided = nil
	return a.Send(ctx, m, r)
}

// sendApproval is Send for a prompt or a decision.
func (a *Adapter) sendApproval(ctx context.Context, m channels.Message, r channels.Reply) error {
	if r.Approval != nil {
		_, err := a.SendPrompt(ctx, m, r)
		return err
	}
	return a.sendDecided(ctx, m, r)
}

// updatePrompt shows d on the prompt, reporting whether it was updated:
// from the reference kept with the approval, else from the click (its
// message, or its response_url for an ephemeral prompt).
func (a *Adapter) updatePrompt(ctx context.Context, m channels.Message, d *channels.ApprovalDecision) (bool, error) {
	blocks := slackapi.MsgOptionBlocks(decidedBlocks(d)...)
	text := slackapi.MsgOptionText("Approval of "+d.Tool+": "+d.Outcome, false)
	if m.Meta[metaPromptEphemeral] != "" && m.Meta[MetaResponseURL] != "" {
		err := a.call(ctx, "response_url", a.opts.MaxAttempts, func(ctx context.Context) error {
			_, _, err := a.api.PostMessageContext(ctx, m.Chat, text, blocks, slackapi.MsgOptionReplaceOriginal(m.Meta[MetaResponseURL]))
			return err
		})
		return err == nil, err
	}
	channel, ts := d.Prompt[promptChannel], d.Prompt[promptTS]
	if channel == "" || ts == "" {
		channel, ts = m.Meta[metaPromptChannel], m.Meta[metaPromptTS]
	}
	if channel == "" || ts == "" {
		return false, nil
	}
	err := a.call(ctx, "chat.update", a.opts.MaxAttempts, func(ctx context.Context) error {
		_, _, _, err := a.api.UpdateMessageContext(ctx, channel, ts, text, blocks)
		return err
	})
	return err == nil, err
}
