package commands

import (
	"context"
	"log/slog"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
		"- `/schedule add \"CRON\" PROMPT | list | remove ID` — run a prompt in this chat on a schedule (administrators)\n" +
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

// TestRegistryRuns: a registered name runs its handler with the rest of
// the line; an Admin command is refused to a non-admin (counted, handler
// not run); an unknown command-shaped word is answered with /help; text
// that only starts with a slash is not a command.
func TestRegistryRuns(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	ran := ""
	r := NewRegistry(m, slog.New(slog.DiscardHandler),
		Command{Names: []string{"/echo"}, Help: []string{"`/echo` — echo"}, Run: func(_ context.Context, c *Call) (string, error) {
			ran = c.Args
			return "echo " + c.Args, nil
		}},
		Command{Names: []string{"/op"}, Who: Admin, Refusal: "admins only", Run: func(context.Context, *Call) (string, error) {
			t.Error("an admin command ran for a non-admin")
			return "", nil
		}},
	)
	eff := policy.New(policy.Config{Default: config.Level{Admins: config.Names{"boss"}}}).Resolve(policy.Scope{Channel: "x"})
	msg := channels.Message{Channel: "x", User: "u"}
	ctx := context.Background()
	if reply, ok, err := r.Run(ctx, nil, msg, eff, "/ECHO  hi there"); !ok || err != nil || reply != "echo hi there" || ran != "hi there" {
		t.Errorf("/echo = %q, %v, %v (args %q)", reply, ok, err, ran)
	}
	if reply, ok, _ := r.Run(ctx, nil, msg, eff, "/op now"); !ok || reply != "admins only" {
		t.Errorf("/op by a non-admin = %q, %v; want the refusal", reply, ok)
	}
	if n := testutil.ToFloat64(m.PolicyDenials.WithLabelValues("x", "admin")); n != 1 {
		t.Errorf("admin denials = %v, want 1", n)
	}
	if reply, ok, _ := r.Run(ctx, nil, msg, eff, "/nope"); !ok || reply != "Unknown command `/nope`. "+r.Help() {
		t.Errorf("/nope = %q, %v", reply, ok)
	}
	if _, ok, _ := r.Run(ctx, nil, msg, eff, "/etc/hosts is missing"); ok {
		t.Error("a path was taken for a command")
	}
}
