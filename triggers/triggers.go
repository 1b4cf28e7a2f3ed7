// Package triggers holds the sources of turns that are not chat messages:
// an alert posted to a webhook, a schedule's fire. Each source is a
// package of its own below this one (triggers/webhook, triggers/schedule);
// they produce Work, which the gateway takes through the same
// de-duplicated, ordered, exactly-once path as a chat message, with a
// destination instead of a sender, and answers through the same delivery
// as any reply. A trigger never imports the gateway: the binary hands each
// source a Submitter.
package triggers

import (
	"context"
	"errors"
	"fmt"

	"github.com/parleyhq/parley/internal/ident"
)

// ValidName reports whether name may name a webhook or a schedule: it is
// a path segment, a metric label and a part of Redis keys, so lower-case
// letters, digits, '-' and '_', at most 63 bytes, led by a letter or a
// digit.
func ValidName(name string) bool { return ident.Name(name, 63) }

// Destination is the chat a trigger's turn is answered in, as written in
// the configuration: `to: {platform: slack, workspace: T0123, chat: C0456}`
// (with `account: NAME` to post as another of the platform's apps).
// Thread, when set, answers in that thread.
type Destination struct {
	Platform string `yaml:"platform" json:"platform"`
	// Account, when set, is the platform's app that posts
	// (slack.accounts.NAME); empty is the section's own.
	Account   string `yaml:"account" json:"account,omitempty"`
	Workspace string `yaml:"workspace" json:"workspace,omitempty"`
	Chat      string `yaml:"chat" json:"chat"`
	Thread    string `yaml:"thread" json:"thread,omitempty"`
}

// Validate reports a destination missing what every platform needs. The
// workspace is required on every chat platform (the Slack team id, the
// Feishu tenant key, the WeChat account): it is part of the conversation
// of each message people send there, so without it a trigger's thread
// would be a conversation of its own, apart from their replies. Only the
// console has none.
func (d Destination) Validate() error {
	switch {
	case d.Platform == "":
		return errors.New("to.platform is required")
	case d.Chat == "":
		return errors.New("to.chat is required")
	case d.Workspace == "" && d.Platform != "console":
		return fmt.Errorf("to.workspace is required on %s (the team, tenant or account the chat is in): people's replies in the thread are known by it", d.Platform)
	}
	return nil
}

// Answer modes of a trigger.
const (
	// AnswerPost posts the trigger's text as it is.
	AnswerPost = "post"
	// AnswerAgent posts the text (when there is one), then runs an agent
	// turn in that conversation with the trigger's data as untrusted data.
	AnswerAgent = "agent"
)

// Work is one turn a trigger asks for.
type Work struct {
	// ID identifies the work across replicas and retries: the same ID is
	// done once (a notification's identity, a schedule's name and fire
	// time).
	ID string
	// Trigger names the source ("webhook:NAME", "schedule:NAME"), for
	// logs, metrics and the turn's user.
	Trigger string
	To      Destination
	// Answer is AnswerPost or AnswerAgent.
	Answer string
	// Text is what is posted (Markdown), "" for none.
	Text string
	// Prompt is the agent turn's request (AnswerAgent); Data is the
	// payload the turn is given as untrusted data; Skill, when set, is
	// loaded first.
	Prompt string
	Data   string
	Skill  string
	// Group, when set and To has no thread, names a thread of the
	// destination chat that all work of the group is answered in: the
	// first work of the group posts Text as the thread's root, the later
	// ones reply in it (an alert group's notifications). The group's
	// thread is kept in Redis (Threads).
	Group string `json:",omitempty"`
	// Resolved marks the work that ends its group (an alert group
	// resolved): its thread is kept for ResolvedThreadTTL from then on.
	Resolved bool `json:",omitempty"`
	// RootText, with Group, is what the group's root post is to show
	// from this work on (Markdown: the root's rendering of this
	// notification). When the work changes the group's state (resolved,
	// or firing again after it was), the gateway edits the root to it, on
	// platforms that edit posts; elsewhere the reply in the thread is all.
	RootText string `json:",omitempty"`
	// EditRoot and Posted are set by the gateway only (a source's work
	// with either is refused): EditRoot on the work that edits the root
	// post it names to Text; Posted on the work whose Text went out as
	// its thread's root, which the thread's conversation records.
	EditRoot string `json:",omitempty"`
	Posted   string `json:",omitempty"`
}

// Validate reports work the gateway cannot take.
func (w Work) Validate() error {
	if w.ID == "" {
		return errors.New("triggers: work without an id")
	}
	if err := w.To.Validate(); err != nil {
		return fmt.Errorf("triggers: %w", err)
	}
	switch w.Answer {
	case AnswerPost:
		if w.Text == "" {
			return errors.New("triggers: answer post without text")
		}
	case AnswerAgent:
		if w.Prompt == "" && w.Data == "" {
			return errors.New("triggers: answer agent without a prompt or data")
		}
	default:
		return fmt.Errorf("triggers: answer %q is neither %q nor %q", w.Answer, AnswerPost, AnswerAgent)
	}
	return nil
}

// Submitter takes Work: it returns once the work is queued durably (so a
// webhook may answer its sender 200), or an error when it is not.
type Submitter interface {
	SubmitWork(ctx context.Context, w Work) error
}
