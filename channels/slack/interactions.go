package slack

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/internal/ident"
)

// Interactions: a click on an approval prompt's button comes as a
// block_actions payload, over HTTP (POST /slack/interactions, signed like
// events, the JSON in the form field payload) or in a Socket Mode
// "interactive" envelope. It is acked at once, whatever it is, and a
// click on Approve or Deny is submitted as "/approve ID" or "/deny ID"
// from the clicking user in the prompt's conversation: the channel and
// thread of the message that holds the button (for an ephemeral prompt,
// the slash command conversation of the clicker). Nothing in the payload
// is trusted beyond Slack's signature: the gateway checks that the
// conversation holds that approval, that the clicker may decide it and
// that it is still pending. The message has no ID, so a click delivered
// twice, or to two replicas, is decided once and the other hears who
// decided.

// InteractionsPath is the route of interactivity requests.
const InteractionsPath = "/slack/interactions"

// interactionTimeout bounds the handling of one click after it was acked:
// the decision, the prompt's update, the clicker's answer.
const interactionTimeout = 30 * time.Second

// Meta keys of a click, read back by Send.
const (
	metaClick           = "click"            // the message is a button click
	metaPromptChannel   = "prompt_channel"   // the message holding the button
	metaPromptTS        = "prompt_ts"        //
	metaPromptEphemeral = "prompt_ephemeral" // …which only the clicker sees
)

// isApprovalValue says whether a button's value looks like an approval
// id: 1–64 letters and digits.
func isApprovalValue(v string) bool { return alnum.Match(v, 1, 64) }

var alnum = ident.Of("A-Za-z0-9")

// serveInteractions answers POST /slack/interactions.
func (a *Adapter) serveInteractions(w http.ResponseWriter, r *http.Request) {
	body, ok := a.verified(w, r)
	if !ok {
		return
	}
	form, err := url.ParseQuery(string(body))
	payload := form.Get("payload")
	if err != nil || payload == "" {
		a.reject(w, r, http.StatusBadRequest, "bad_request")
		return
	}
	var cb slackapi.InteractionCallback
	if err := json.Unmarshal([]byte(payload), &cb); err != nil {
		a.reject(w, r, http.StatusBadRequest, "bad_request")
		return
	}
	m, ok, why := a.click(cb)
	if !ok {
		a.log.Debug("interaction ignored", "why", why)
		w.WriteHeader(http.StatusOK)
		return
	}
	h := a.httpHandler()
	if h == nil {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	// Acked before it is decided: Slack shows the clicker an error after
	// 3 s, and the decision sends (the prompt's update) take their time.
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), interactionTimeout)
	defer cancel()
	a.submitClick(ctx, h, m)
}

// socketInteraction handles an "interactive" Socket Mode envelope: acked
// at once, then as over HTTP.
func (a *Adapter) socketInteraction(ctx context.Context, sm *socketmode.Client, h channels.Handler, req *socketmode.Request) {
	a.ack(ctx, sm, req.EnvelopeID, nil)
	var cb slackapi.InteractionCallback
	if err := json.Unmarshal(req.Payload, &cb); err != nil {
		a.log.Debug("undecodable interactive envelope", "err", err)
		return
	}
	m, ok, why := a.click(cb)
	if !ok {
		a.log.Debug("interaction ignored", "why", why)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, interactionTimeout)
	defer cancel()
	a.submitClick(ctx, h, m)
}

// submitClick hands a click to the gateway; when it cannot take it, the
// clicker is told so (the click is not delivered again).
func (a *Adapter) submitClick(ctx context.Context, h channels.Handler, m channels.Message) {
	err := h.Submit(ctx, m)
	if err == nil {
		return
	}
	a.log.Error("could not hand over an approval click", "err", err)
	if err := a.Send(ctx, m, channels.Reply{Notice: true, Failed: true, Text: "Sorry, I could not take that just now. Please try again."}); err != nil {
		a.log.Warn("could not tell the clicker", "err", err)
	}
}

// click turns a block_actions payload with a click on Approve or Deny
// into the message to submit; ok is false for anything else.
func (a *Adapter) click(cb slackapi.InteractionCallback) (m channels.Message, ok bool, why string) {
	if cb.Type != slackapi.InteractionTypeBlockActions {
		return m, false, "payload type " + string(cb.Type)
	}
	var verb, value, answer string
	for _, act := range cb.ActionCallback.BlockActions {
		switch {
		case act == nil:
		case act.ActionID == ActionApprove:
			verb, value = "/approve", act.Value
		case act.ActionID == ActionDeny:
			verb, value = "/deny", act.Value
		case strings.HasPrefix(act.ActionID, ActionAnswer):
			text, ok := answerClick(act.ActionID, act.Value)
			if !ok {
				return m, false, "not a question's button"
			}
			verb, answer = channels.AnswerCommand, text
		}
		if verb != "" {
			break
		}
	}
	chat := cb.Container.ChannelID
	if chat == "" {
		chat = cb.Channel.ID
	}
	switch {
	case verb == "":
		return m, false, "not an approval button"
	case answer == "" && !isApprovalValue(value):
		return m, false, "not an approval id"
	case cb.User.ID == "" || chat == "" || cb.Container.MessageTs == "":
		return m, false, "no user or message"
	case cb.User.ID == a.BotUserID():
		return m, false, "own click"
	}
	team := cb.Team.ID
	if team == "" {
		team = cb.User.TeamID
	}
	m = channels.Message{
		Channel: Name, Account: a.opts.Account, Workspace: team, Chat: chat, User: cb.User.ID, UserName: cb.User.Name,
		Text: clickText(verb, value, answer), DM: isDMChannel(chat) || isDMName(cb.Channel.Name), Received: time.Now(),
		Meta: map[string]string{
			metaClick: "1", metaPromptChannel: chat, metaPromptTS: cb.Container.MessageTs,
			MetaResponseURL: cb.ResponseURL,
		},
	}
	if cb.Container.IsEphemeral {
		// Only a slash command's conversation is answered ephemerally.
		m.Thread = "slash:" + cb.User.ID
		m.Meta[metaPromptEphemeral] = "1"
	} else {
		m.Thread = cb.Message.ThreadTimestamp
		m.Meta[MetaThreadTS] = m.Thread // without a response_url, answered there
	}
	if m.Meta[MetaResponseURL] == "" {
		delete(m.Meta, MetaResponseURL)
	}
	return m, true, ""
}

// clickText is the message a click is submitted as: a question's answer
// as answerClick read it, else the approval command and its id.
func clickText(verb, value, answer string) string {
	if answer != "" {
		return answer
	}
	return verb + " " + value
}
