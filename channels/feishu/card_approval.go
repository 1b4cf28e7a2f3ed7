package feishu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/parleyhq/parley/channels"
)

// Approval prompts as interactive cards.
//
// A prompt (a Reply with Approval set) is a card naming the tool and its
// arguments in plain_text elements — Feishu renders plain_text as typed, so
// nothing in the arguments can become an <at>, a link or markup, whatever
// the escaping before — with Approve and Deny buttons. A button's value
// carries the approval's id and the conversation the card was sent to
// (chat, thread); Feishu returns it unchanged with the click, and the
// gateway checks all of it against what is pending, so the value is a
// pointer, never an authority.
//
// SendPrompt returns the card's message id as the prompt's reference, which the gateway keeps with the approval in
// Redis: whichever replica learns of the decision (a click, a typed
// /approve, the expiry) gets it back and redraws the card with the
// decision and without buttons.

// Button values: the keys of the value object Feishu hands back.
const (
	valueApproval = "parley_approval" // the approval id
	valueDecision = "decision"        // approve or deny
	valueChat     = "chat"
	valueThread   = "thread"
	valueDM       = "dm" // "1" in a direct chat
)

// Decisions a button asks for.
const (
	decisionApprove = "approve"
	decisionDeny    = "deny"
)

// refMessageID is the key of the card's message id in a prompt's
// reference.
const refMessageID = "message_id"

var _ channels.Prompter = (*Adapter)(nil)

// SendPrompt implements channels.Prompter: the prompt card (or, when
// Feishu refuses the card, the prompt as text, with no reference); a reply
// without Approval is sent as Send sends it.
func (a *Adapter) SendPrompt(ctx context.Context, m channels.Message, r channels.Reply) (map[string]string, error) {
	ap := r.Approval
	if ap == nil {
		return nil, a.Send(ctx, m, r)
	}
	value := map[string]string{valueApproval: ap.ID, valueChat: m.Chat, valueThread: m.Thread}
	if m.DM {
		value[valueDM] = "1"
	}
	card, err := json.Marshal(approvalCard(ap, value))
	if err != nil {
		return nil, err
	}
	if err := a.waitChat(ctx, m); err != nil {
		return nil, err
	}
	id, err := a.postWith(ctx, a.calls, m, "interactive", string(card), sendUUID(m, 0, "approval:"+ap.ID, ap.Code))
	var apiErr *APIError
	if err != nil && errors.As(err, &apiErr) && !apiErr.Retryable() {
		a.log.Warn("approval card refused; sending the prompt as text", "code", apiErr.Code, "msg", apiErr.Msg, "log_id", apiErr.LogID)
		return nil, a.Send(ctx, m, channels.Reply{Text: r.Text, Notice: true})
	}
	if err != nil || id == "" {
		return nil, err
	}
	return map[string]string{refMessageID: id}, nil
}

// patchCard redraws a sent card (PATCH im/v1/messages/:message_id; the
// card is shared, so everyone sees the new one).
func (a *Adapter) patchCard(ctx context.Context, messageID string, card map[string]any) error {
	raw, err := json.Marshal(card)
	if err != nil {
		return err
	}
	return a.call(ctx, "update_card", http.MethodPatch, "/open-apis/im/v1/messages/:message_id",
		map[string]string{"message_id": messageID}, map[string]string{"content": string(raw)}, nil)
}

// plain is a plain_text object: shown as typed, never parsed.
func plain(s string) map[string]any { return map[string]any{"tag": "plain_text", "content": s} }

// cardBody is the part of a prompt card that stays when it is redrawn.
func cardBody(tool, args string) []any {
	return []any{
		map[string]any{"tag": "div", "text": plain("Tool: " + tool)},
		map[string]any{"tag": "div", "text": plain(args)},
	}
}

// approvalCard is the prompt: the call, when it expires, and the buttons.
func approvalCard(ap *channels.Approval, value map[string]string) map[string]any {
	button := func(label, kind, decision string) map[string]any {
		v := map[string]string{valueDecision: decision}
		for k, s := range value {
			v[k] = s
		}
		return map[string]any{"tag": "button", "text": plain(label), "type": kind, "value": v}
	}
	elements := cardBody(ap.Tool, ap.Args)
	elements = append(elements,
		map[string]any{"tag": "note", "elements": []any{plain(fmt.Sprintf("Code %s · expires %s", ap.Code, ap.Expires.UTC().Format("2006-01-02 15:04 UTC")))}},
		map[string]any{"tag": "action", "actions": []any{
			button("Approve", "primary", decisionApprove),
			button("Deny", "danger", decisionDeny),
		}},
	)
	return map[string]any{
		"config":   map[string]any{"wide_screen_mode": true, "update_multi": true},
		"header":   map[string]any{"template": "orange", "title": plain("Approval needed")},
		"elements": elements,
	}
}

// isOpenID says whether id has the shape of a Feishu open_id, "ou_" and
// 1–64 of keyChars: only such an id goes into an <at> of a redrawn card.
func isOpenID(id string) bool {
	rest, ok := strings.CutPrefix(id, "ou_")
	return ok && keyChars.Match(rest, 1, 64)
}

// decidedCard is the card redrawn with its decision and without buttons:
// the tool, its arguments, who decided and when.
func decidedCard(d *channels.ApprovalDecision) map[string]any {
	title, template := "Approval "+d.Outcome, "grey"
	switch d.Outcome {
	case channels.DecisionApproved:
		title, template = "Approved", "green"
	case channels.DecisionDenied:
		title, template = "Denied", "red"
	case channels.DecisionExpired:
		title = "Approval expired"
	case channels.DecisionCancelled:
		title = "Approval cancelled"
	}
	var elements []any
	if d.Tool != "" {
		elements = append(elements, map[string]any{"tag": "div", "text": plain("Tool: " + d.Tool)})
	}
	if d.Args != "" {
		elements = append(elements, map[string]any{"tag": "div", "text": plain(d.Args)})
	}
	at := d.At
	if at.IsZero() {
		at = time.Now()
	}
	when := at.UTC().Format("2006-01-02 15:04 UTC")
	switch {
	case d.Outcome == channels.DecisionExpired:
		elements = append(elements, map[string]any{"tag": "note", "elements": []any{plain("Nobody decided in time; expired " + when)}})
	case isOpenID(d.By):
		// An <at> shows the person's name; the id is Feishu's own, checked.
		elements = append(elements, map[string]any{"tag": "div", "text": map[string]any{"tag": "lark_md",
			"content": title + " by <at id=" + d.By + "></at> · " + when}})
	default:
		who := d.ByName
		if who == "" {
			who = d.By
		}
		elements = append(elements, map[string]any{"tag": "div", "text": plain(title + " by " + who + " · " + when)})
	}
	return map[string]any{
		"config":   map[string]any{"wide_screen_mode": true, "update_multi": true},
		"header":   map[string]any{"template": template, "title": plain(title)},
		"elements": elements,
	}
}

// drawDecision redraws the prompt card of a final decision, from any
// replica, and reports whether the reply is for the card alone: the
// expiry nobody asked about, which the model's answer that follows tells.
// Any other answer (to a typed /approve) is posted as well.
func (a *Adapter) drawDecision(ctx context.Context, d *channels.ApprovalDecision) (cardOnly bool) {
	if !d.Final() {
		return false
	}
	if id := d.Prompt[refMessageID]; id != "" {
		if err := a.patchCard(ctx, id, decidedCard(d)); err != nil {
			a.log.Warn("cannot draw the decision on the approval card", "err", err)
		}
	}
	return d.Outcome == channels.DecisionExpired && !d.Already
}
