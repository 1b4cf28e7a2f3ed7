package commands

import (
	"testing"
)

// TestHelpIsTheRegistry: /help lists the help lines of the registered
// commands, in order, and nothing else.
func TestHelpIsTheRegistry(t *testing.T) {
	t.Parallel()
	want := "Commands:\n" +
		"- `/reset` — forget this conversation\n" +
		"- `/compact` — summarise the older part of this conversation to make room\n" +
		"- `/skill:NAME [request]` — use a skill for this message\n" +
		"- `/skill list [PAGE] | show NAME` — the skills of this conversation (administrators)\n" +
		"- `/skill on NAME | off NAME | trust NAME | reload` — change the skills of every chat (global administrators)\n" +
		"- `/approve CODE` | `/deny CODE` — decide a tool call waiting for approval (approvers); `/show CODE` shows its arguments in full; `/cancel` drops it\n" +
		"- `/help` — this list"
	if got := Standard(Deps{}).Help(); got != want {
		t.Errorf("Help() =\n%s\nwant\n%s", got, want)
	}
	r := NewRegistry(nil, nil, Command{Names: []string{"/x"}, Help: []string{"`/x` — x"}})
	if got := r.Help(); got != "Commands:\n- `/x` — x" {
		t.Errorf("a registry of /x helps with %q", got)
	}
}
