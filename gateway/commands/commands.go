// Package commands is the one registry of the chat commands the gateway
// answers itself (/reset, /compact, /skill, /approve, …): each command's
// names, who may run it, its lines of /help and its handler. /help is
// generated from the registry, and a text shaped like a command that the
// registry does not know is answered with it, never sent to the model.
//
// Commands run under the conversation lock, in turn with the messages
// around them; /approve, /deny, /show and /cancel of a pending approval
// are decided at once, when they arrive (see Decider), since the
// conversation's queue waits for them.
package commands

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
)

// Who says who may run a command.
type Who int

// Who may run a command. The registry refuses an Admin command to anyone
// else; an Approver command is checked by its handler against the
// approval it names.
const (
	Anyone Who = iota
	// Admin: an administrator of the conversation's scope or a global one.
	Admin
	// Approver: someone the policy lets decide the approval.
	Approver
)

// Call is one run of a command.
type Call struct {
	Msg  channels.Message
	Eff  *policy.Effective
	Args string // the text after the command's name
	// Lock is the conversation's lock, held for the run.
	Lock *sessions.Lock
}

// Command is one entry of the registry.
type Command struct {
	// Names are "/name" and its aliases, lower-case.
	Names []string
	Who   Who
	// Help are the command's lines of /help, without the leading "- "
	// (none: the command is not listed).
	Help []string
	// Refusal answers someone Who does not admit.
	Refusal string
	// Run answers the command; an error is a failure of Redis (the
	// message stays queued and is answered again).
	Run func(ctx context.Context, c *Call) (string, error)
}

// Registry is the set of commands.
type Registry struct {
	cmds    []Command
	byName  map[string]*Command
	help    string
	metrics *metrics.Metrics
	log     *slog.Logger
}

// NewRegistry returns a registry of cmds, in the order /help lists them.
// m and log are not nil.
func NewRegistry(m *metrics.Metrics, log *slog.Logger, cmds ...Command) *Registry {
	r := &Registry{cmds: cmds, byName: map[string]*Command{}, metrics: m, log: log}
	var b strings.Builder
	b.WriteString("Commands:")
	for i := range r.cmds {
		c := &r.cmds[i]
		for _, n := range c.Names {
			r.byName[n] = c
		}
		for _, line := range c.Help {
			b.WriteString("\n- " + line)
		}
	}
	r.help = b.String()
	return r
}

// Help is the text of /help.
func (r *Registry) Help() string { return r.help }

// Run answers text when it is a command. ok reports whether it was one: a
// text that starts with a slash but is not shaped like a command
// ("/etc/hosts is missing") goes to the model like any other message,
// while an unknown "/word" is answered with the list of commands.
func (r *Registry) Run(ctx context.Context, lock *sessions.Lock, m channels.Message, eff *policy.Effective, text string) (reply string, ok bool, err error) {
	name, args := Split(text)
	c := r.byName[name]
	if c == nil {
		if Shaped(name) {
			return fmt.Sprintf("Unknown command `%s`. %s", name, r.help), true, nil
		}
		return "", false, nil
	}
	if c.Who == Admin && !eff.IsGlobalAdmin(m.User) && !eff.IsAdmin(m.User) && !eff.IsOperator(m.User) {
		r.metrics.PolicyDenials.WithLabelValues(m.Channel, "admin").Inc()
		return c.Refusal, true, nil
	}
	reply, err = c.Run(ctx, &Call{Msg: m, Eff: eff, Args: args, Lock: lock})
	return reply, true, err
}

// Shaped reports whether name ("/word") looks like a command rather than
// text that happens to start with a slash: a letter, then letters,
// digits, '-' or '_', and nothing else (no second slash, no dot).
func Shaped(name string) bool {
	if len(name) < 2 || len(name) > 32 {
		return false
	}
	for i, r := range name[1:] {
		switch {
		case r >= 'a' && r <= 'z':
		case i > 0 && (r >= '0' && r <= '9' || r == '-' || r == '_'):
		default:
			return false
		}
	}
	return true
}

// Split returns "/name" (lower-cased) and the rest of the line.
func Split(text string) (name, args string) {
	if !strings.HasPrefix(text, "/") {
		return "", ""
	}
	name, args, _ = strings.Cut(text, " ")
	if i := strings.IndexAny(name, "\n\t"); i >= 0 {
		args = name[i:] + " " + args
		name = name[:i]
	}
	return strings.ToLower(name), strings.TrimSpace(args)
}
