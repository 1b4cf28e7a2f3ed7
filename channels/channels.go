// Package channels defines what every platform adapter exchanges with the
// gateway: one normalised inbound Message, one Reply, the Channel interface
// each adapter implements and the Handler the gateway gives it. Adapters live
// in sub-packages and never import the agent.
//
// # Approvals with buttons
//
// A tool call waiting for approval is shown with a Reply whose Approval is
// set; its Text is the prompt as text, with codes to type (/approve CODE),
// so that every platform can show it. An adapter whose platform has buttons
// shows them instead, and when it can change a message it has posted it
// implements Prompter, so that the gateway keeps what names the posted
// prompt with the approval (in Redis, not in the adapter's memory: the
// replica that learns the decision, or the expiry, is often not the one
// that posted the prompt).
//
// A click is not a decision the adapter makes. Once the click's request is
// verified as the platform's, the adapter submits it as the message
// "/approve ID" or "/deny ID" (Approval.ID) from the person who clicked, in
// the conversation the prompt belongs to, with ID empty, and in Meta
// whatever it needs to answer that click (the prompt's message, a reply
// address). The gateway decides such a message exactly as a typed one,
// because the value in a button is chosen by whoever sends the request: the
// conversation must hold that approval, the clicker must be an approver,
// and the approval must still be pending, all checked in the gateway against
// Redis. The message's ID is empty because one click reaching two replicas,
// or a double click, must be answered each time with what happened
// ("already approved by NAME"), never silently dropped as a duplicate; the
// atomic decision makes sure only one of them counts.
//
// Every answer to such a message, typed or clicked, carries Reply.Decided,
// and Meta comes back untouched. An adapter that can update the prompt in
// place does so from Decided (the outcome, who, when, and the Prompter's
// reference when the gateway has it) and answers only the clicker where a
// refusal is concerned: a "you can't approve this" or "no such approval"
// goes to that person alone (Slack: an ephemeral message), and the prompt
// stays as it is, since nothing changed. A platform without this support
// ignores Decided and sends Text, as for any notice. When an approval
// expires with nobody deciding, the gateway sends a Reply with Decided
// (outcome expired) to the message that paused, but only to a Prompter
// whose prompt reference it holds: that reply updates the prompt and posts
// nothing, since the model's answer that follows says the approval expired.
package channels

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
)

// Message is one inbound chat message, normalised from a platform event.
type Message struct {
	// ID is the platform's event or message id; the gateway de-duplicates
	// on it. Empty means "never a duplicate" (the console).
	ID      string `json:"id,omitempty"`
	Channel string `json:"channel"` // console, slack, feishu, wechat
	// Account names which of the platform's apps the message came to and
	// answers from (slack.accounts.NAME); empty is the section's own app,
	// the account named default.
	Account   string    `json:"account,omitempty"`
	Workspace string    `json:"workspace,omitempty"` // Slack team, Feishu tenant, WeChat account
	Chat      string    `json:"chat,omitempty"`      // Slack channel, Feishu chat, WeChat user
	Thread    string    `json:"thread,omitempty"`    // Slack thread_ts, Feishu thread, …
	User      string    `json:"user,omitempty"`
	UserName  string    `json:"user_name,omitempty"`
	Text      string    `json:"text"`
	DM        bool      `json:"dm,omitempty"`
	Received  time.Time `json:"received"`
	// Unsupported is set by an adapter for a message with nothing it can
	// read (an image, a sticker, a file): the note to answer it with. The
	// adapter submits such a message like any other rather than answering
	// it itself, so that the gateway's access rules decide first: someone
	// they refuse gets nothing, not even the note. It never reaches the
	// model or the history.
	Unsupported string `json:"unsupported,omitempty"`
	// Attachments are the images and files the message carries, as the
	// platform describes them: references, never bytes. The gateway
	// fetches them during the turn through the adapter's
	// AttachmentFetcher (see attachment.go for the rules).
	Attachments []Attachment `json:"attachments,omitempty"`
	// Ambient marks a message the bot received but was not addressed in,
	// on a platform that cannot read its rooms back (see RoomReader): the
	// gateway keeps it, bounded, for the chat's next addressed turn and
	// answers nothing.
	Ambient bool `json:"ambient,omitempty"`
	// Meta carries what the adapter needs to answer (a reply token, the
	// message to react to). The gateway passes it back untouched.
	Meta map[string]string `json:"meta,omitempty"`

	// Marks are flags of the message's conversation that the gateway sets
	// (or refreshes) in the same atomic step that accepts the message; they
	// expire with the conversation's history. An adapter keeps its own
	// memory of a conversation this way without a Redis call of its own
	// (Slack: "the bot takes part in this thread").
	Marks []string `json:"-"`
	// RequireMark, when set, names a mark the conversation must already
	// have: without it the message is not accepted, nothing is recorded,
	// and Submit returns ErrUnmarked (Slack: a follow-up in a thread the
	// bot does not take part in).
	RequireMark string `json:"-"`
}

// ErrUnmarked is Submit's answer for a message whose conversation lacks
// the mark the message requires (Message.RequireMark). The adapter drops
// the message; it is not a failure.
var ErrUnmarked = errors.New("channels: the conversation lacks the mark the message requires")

// ConversationKey is channel:workspace:chat:thread, the unit of history,
// ordering, de-duplication and locking. A message to an account other than
// the default has channel/account in the first place: two apps in one
// chat hold two conversations, while the default account's keys (and what
// Redis keeps under them) stay as they were before accounts existed.
func (m Message) ConversationKey() string {
	return strings.Join([]string{AdapterKey(m.Channel, m.Account), m.Workspace, m.Chat, m.Thread}, ":")
}

// DefaultAccount is the name of the account a platform's section itself
// configures; a Message names it with an empty Account.
const DefaultAccount = "default"

// AdapterKey names the adapter of one account of a platform: the
// platform's name for the default account (empty or "default"), else
// platform/account. The gateway registers adapters under it.
func AdapterKey(channel, account string) string {
	if account == "" || account == DefaultAccount {
		return channel
	}
	return channel + "/" + account
}

// SplitAdapterKey is AdapterKey's inverse: the platform and the account
// ("" for the default) of the first part of a conversation key.
func SplitAdapterKey(key string) (channel, account string) {
	channel, account, _ = strings.Cut(key, "/")
	return channel, account
}

// AccountLabel is the account label value of a metric: "default" for the
// section's own app, else the account's name (bounded by the file).
func AccountLabel(account string) string {
	if account == "" {
		return DefaultAccount
	}
	return account
}

// Reply is what the gateway sends back for a Message. Text is Markdown; the
// adapter converts it to the platform's format and splits it to size.
type Reply struct {
	Text string
	// Notice marks a gateway-generated answer (a refusal, a command result)
	// rather than the model's.
	Notice bool
	// Failed marks a reply that says the message was not answered: the
	// model is down or refused the bot's configuration, or the message was
	// refused. Text then says why; `parley chat -m` exits non-zero.
	Failed bool `json:",omitempty"`
	// Approval is set on a prompt asking for approval of a tool call;
	// Text is then the prompt as text (with the codes to type). An
	// adapter that can show buttons may show them instead of the codes.
	Approval *Approval `json:",omitempty"`
	// Decided is set on the answer to /approve, /deny or /cancel (typed or
	// clicked) and on an expiry: what became of the approval, for an
	// adapter that updates the prompt in place. Text says the same for the
	// others.
	Decided *ApprovalDecision `json:",omitempty"`
	// Question is set on a question a tool's server asks the person (see
	// Question); Text is then the question as text, with what to type.
	Question *Question `json:",omitempty"`
}

// Outcomes of an ApprovalDecision.
const (
	DecisionApproved  = "approved"
	DecisionDenied    = "denied"
	DecisionCancelled = "cancelled"
	DecisionExpired   = "expired"
	// DecisionNotAllowed: the sender may not decide this approval; nothing
	// changed. Only the sender is answered.
	DecisionNotAllowed = "not allowed"
	// DecisionUnknown: no approval of this conversation matches (a wrong
	// code, another conversation's, one already answered and gone);
	// nothing changed. Only the sender is answered, without saying which.
	DecisionUnknown = "unknown"
)

// ApprovalDecision is what became of an approval, on the answer to a
// decision or an expiry.
type ApprovalDecision struct {
	// ID and Code name the approval (empty for DecisionUnknown).
	ID, Code string
	// Tool is the tool's name and Args its arguments, as in Approval, so
	// that the prompt can be shown again with its decision.
	Tool, Args string
	// Outcome is one of the Decision constants.
	Outcome string
	// Already: the decision in Outcome was made earlier, by By, and this
	// message changed nothing ("already approved by NAME").
	Already bool
	// By and ByName name who decided (empty for an expiry or a refusal);
	// At is when it was decided or expired.
	By, ByName string
	At         time.Time
	// Prompt is what the adapter's Prompter returned for the posted
	// prompt, when the gateway has it (nil otherwise: the prompt was not
	// posted by a Prompter, or the decision came before it was stored).
	Prompt map[string]string
}

// Final reports an outcome that ends the approval (the prompt shows it),
// as opposed to a refusal that leaves it as it was.
func (d *ApprovalDecision) Final() bool {
	switch d.Outcome {
	case DecisionApproved, DecisionDenied, DecisionCancelled, DecisionExpired:
		return true
	}
	return false
}

// Prompter is implemented by adapters that can update an approval prompt
// after posting it. The gateway posts a Reply whose Approval is set with
// SendPrompt instead of Send, and keeps the reference it returns with the
// approval, handing it back in ApprovalDecision.Prompt.
type Prompter interface {
	// SendPrompt posts r as Send would and returns what names the posted
	// prompt (opaque to the gateway; small: it is stored in Redis), or nil
	// when it cannot be named.
	SendPrompt(ctx context.Context, m Message, r Reply) (ref map[string]string, err error)
}

// Approval is a tool call waiting for a person's decision.
type Approval struct {
	// ID names the approval in a button's value; Code is what people type
	// (/approve CODE).
	ID, Code string
	// Tool is the tool's name; Args its arguments, readable, cut to size,
	// and escaped so that nothing in them is a mention or markup.
	Tool, Args string
	Expires    time.Time
}

// Handler is the gateway as an adapter sees it.
type Handler interface {
	// Submit hands over a verified message. It returns once the message is
	// accepted (de-duplicated and queued) — not when it is answered — so an
	// adapter can ack its platform at once.
	Submit(ctx context.Context, m Message) error
}

// Channel is one platform adapter.
type Channel interface {
	// Name is the platform name used in conversation keys and metrics.
	Name() string
	// Send delivers a reply to the conversation m came from.
	Send(ctx context.Context, m Message, r Reply) error
}

// Accounted is implemented by an adapter that serves one of several
// accounts (apps) of its platform: the gateway registers it under
// AdapterKey(Name(), Account()), so that replies to a message leave from
// the app the message came to. An adapter without it, or whose Account is
// empty or DefaultAccount, serves the platform's default account.
type Accounted interface {
	Account() string
}

// Runner is implemented by adapters that hold connections or poll
// (Socket Mode, long connections, long polls).
type Runner interface {
	// Run hands what arrives to h until ctx ends. It returns nil once ctx
	// has ended and every goroutine it started has stopped — every adapter
	// the same, so a caller never needs to tell a cancellation from a
	// failure. A non-nil error means the adapter could not run at all (it
	// was misconfigured); connections that drop are reconnected inside
	// Run, never reported by returning.
	Run(ctx context.Context, h Handler) error
}

// Typing is implemented by adapters that can show that a turn is running
// (a reaction, a typing indicator). The returned func clears it.
type Typing interface {
	StartTyping(ctx context.Context, m Message) (stop func())
}

// Awaited is implemented by adapters whose sender waits for an answer to
// each message before going on (the console). The gateway then answers
// every message, also those it leaves unanswered elsewhere: a blank
// message, or a refusal already given to the sender today.
type Awaited interface {
	AwaitsEveryReply()
}

// Unanswered is implemented by adapters whose platform holds the
// sender's request open for the answer (an Official Account's passive
// reply). The gateway calls LeftUnanswered for a message it finishes
// without a reply (a refusal it does not repeat to the sender, a blank
// message), so that the request is answered at once rather than at its
// deadline; nothing is sent for m afterwards.
type Unanswered interface {
	LeftUnanswered(ctx context.Context, m Message)
}

// HTTPChannel is implemented by adapters that receive webhooks; Mount adds
// their routes (e.g. POST /slack/events) to the server's mux.
type HTTPChannel interface {
	Mount(mux *http.ServeMux)
}

// Health is implemented by adapters whose connection can be lost (long
// connections, long polls). A non-nil error marks /readyz degraded.
type Health interface {
	Ready() error
}
