package gateway

import (
	"context"
	"strings"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/sessions"
)

// command handles chat commands. ok reports whether text was a command; a
// text that merely starts with a slash but names no command goes to the
// model like any other message. Commands run under the conversation lock,
// so /reset is ordered with the messages around it.
func (g *Gateway) command(ctx context.Context, lock *sessions.Lock, m channels.Message, text string) (reply string, ok bool, err error) {
	name, _ := splitCommand(text)
	switch name {
	case "/reset":
		if err := g.store.Clear(ctx, lock.Conversation()); err != nil {
			return "", true, err
		}
		return "Conversation cleared. I've forgotten everything we said here.", true, nil
	case "/help":
		return helpText, true, nil
	}
	return "", false, nil
}

const helpText = "Commands:\n" +
	"- `/reset` — forget this conversation\n" +
	"- `/help` — this list"

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
