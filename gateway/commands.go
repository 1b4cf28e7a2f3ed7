package gateway

import (
	"context"
	"fmt"
	"strings"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
)

// command handles chat commands. ok reports whether text was a command; a
// text that starts with a slash but is not shaped like a command ("/etc/hosts
// is missing") goes to the model like any other message, while an unknown
// "/word" is answered with the list of commands, not sent to the model.
// Commands run under the conversation lock, so they are ordered with the
// messages around them.
func (g *Gateway) command(ctx context.Context, lock *sessions.Lock, m channels.Message, eff *policy.Effective, text string) (reply string, ok bool, err error) {
	name, args := splitCommand(text)
	switch name {
	case "/reset":
		if err := g.store.Clear(ctx, lock.Conversation()); err != nil {
			return "", true, err
		}
		return "Conversation cleared. I've forgotten everything we said here.", true, nil
	case "/compact":
		return g.forceCompact(ctx, lock, m.Channel), true, nil
	case "/skill", "/skills":
		return g.skillCommand(ctx, m, eff, args), true, nil
	case "/help":
		return helpText, true, nil
	case "/approve", "/deny", "/show":
		// Decided in Submit while an approval is pending; here there is none.
		return noSuchApproval, true, nil
	case "/cancel":
		return nothingPending, true, nil
	}
	if commandShaped(name) {
		return fmt.Sprintf("Unknown command `%s`. %s", name, helpText), true, nil
	}
	return "", false, nil
}

// commandShaped reports whether name ("/word") looks like a command rather
// than text that happens to start with a slash: a letter, then letters,
// digits, '-' or '_', and nothing else (no second slash, no dot).
func commandShaped(name string) bool {
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

const helpText = "Commands:\n" +
	"- `/reset` — forget this conversation\n" +
	"- `/compact` — summarise the older part of this conversation to make room\n" +
	"- `/skill:NAME [request]` — use a skill for this message\n" +
	"- `/skill list [PAGE] | show NAME` — the skills of this conversation (administrators)\n" +
	"- `/skill on NAME | off NAME | trust NAME | reload` — change the skills of every chat (global administrators)\n" +
	"- `/approve CODE` | `/deny CODE` — decide a tool call waiting for approval (approvers); `/show CODE` shows its arguments in full; `/cancel` drops it\n" +
	"- `/help` — this list"

func (g *Gateway) forceCompact(ctx context.Context, lock *sessions.Lock, channel string) string {
	history, err := g.store.History(ctx, lock.Conversation())
	if err != nil {
		g.log.Error("compact: read history", "err", err)
		return "Sorry, I could not read this conversation. Please try again."
	}
	switch _, outcome := g.compact(ctx, lock, channel, history); outcome {
	case compactNothing:
		return "Nothing to compact yet: this conversation is short enough."
	case compactFailed:
		return "Sorry, I could not compact this conversation just now. Please try again later."
	}
	return "Compacted: the older part of this conversation is now a summary; the latest exchanges are kept as they were."
}

// splitCommand returns "/name" (lower-cased) and the rest of the line.
func splitCommand(text string) (name, args string) {
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
