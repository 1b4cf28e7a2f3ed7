package commands

import (
	"context"
	"log/slog"

	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// Conversations forgets a conversation's history (sessions.Store).
type Conversations interface {
	Clear(ctx context.Context, conv string) error
}

// Compactor summarises a conversation's older rounds on request and says
// how it went, in a sentence for the chat.
type Compactor interface {
	Force(ctx context.Context, lock *sessions.Lock, channel string) string
}

// Deps is what the standard commands use.
type Deps struct {
	Conversations Conversations
	Compactor     Compactor
	// Skills is nil on a bot without skills.
	Skills    *Skills
	SkillSets SkillSets
	// Schedules is nil on a bot without Redis (no /schedule).
	Schedules Schedules
	Metrics   *metrics.Metrics
	Log       *slog.Logger
}

// Answers to /approve, /deny, /show and /cancel. The refusals say nothing
// of what exists: a wrong code, another conversation's, one that was never
// issued all read the same.
const (
	NoSuchApproval = "There is no pending approval with that code."
	NotAnApprover  = "You can't approve this."
	NothingPending = "There is nothing waiting for approval here."
)

// Standard is the registry of the gateway's chat commands.
func Standard(d Deps) *Registry {
	var r *Registry
	sk := &skillCommand{skills: d.Skills, sets: d.SkillSets, metrics: d.Metrics, log: d.Log}
	r = NewRegistry(d.Metrics, d.Log,
		Command{
			Names: []string{"/reset"},
			Help:  []string{"`/reset` — forget this conversation"},
			Run: func(ctx context.Context, c *Call) (string, error) {
				if err := d.Conversations.Clear(ctx, c.Lock.Conversation()); err != nil {
					return "", err
				}
				return "Conversation cleared. I've forgotten everything we said here.", nil
			},
		},
		Command{
			Names: []string{"/compact"},
			Help:  []string{"`/compact` — summarise the older part of this conversation to make room"},
			Run: func(ctx context.Context, c *Call) (string, error) {
				return d.Compactor.Force(ctx, c.Lock, c.Msg.Channel), nil
			},
		},
		Command{
			Names: []string{"/skill", "/skills"},
			Who:   Admin,
			Help: []string{
				"`/skill:NAME [request]` — use a skill for this message",
				"`/skill list [PAGE] | show NAME` — the skills of this conversation (administrators)",
				"`/skill on NAME | off NAME | trust NAME | reload` — change the skills of every chat (global administrators)",
			},
			Refusal: "Sorry, only an administrator of this bot can manage skills here. `/skill:NAME` to use a skill works for everyone.",
			Run:     sk.run,
		},
		scheduleCommand(d.Schedules),
		Command{
			Names: []string{"/approve", "/deny", "/show"},
			Who:   Approver,
			Help:  []string{"`/approve CODE` | `/deny CODE` — decide a tool call waiting for approval (approvers); `/show CODE` shows its arguments in full; `/cancel` drops it"},
			// Decided on arrival (Decider) while an approval is pending;
			// in turn there is none.
			Run: func(context.Context, *Call) (string, error) { return NoSuchApproval, nil },
		},
		Command{
			Names: []string{"/cancel"},
			Run:   func(context.Context, *Call) (string, error) { return NothingPending, nil },
		},
		Command{
			Names: []string{"/help"},
			Help:  []string{"`/help` — this list"},
			Run:   func(context.Context, *Call) (string, error) { return r.Help(), nil },
		},
	)
	return r
}
