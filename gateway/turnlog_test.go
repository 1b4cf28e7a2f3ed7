package gateway_test

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// TestOneInfoLinePerAnsweredTurn: each answered model turn logs one info
// line with its channel, its conversation as shown to operators, its
// duration, outcome and tokens, and nothing of what was said; a command's
// answer logs none.
func TestOneInfoLinePerAnsweredTurn(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Second})
	model := openaitest.New(t)
	m := metrics.New()
	quiet := slog.New(slog.DiscardHandler)
	a := agent.New(agent.Config{Model: "test", Timeout: 5 * time.Second, MaxRetries: 1, BackoffBase: time.Millisecond},
		agent.NewClient(model.URL(), "sk-test", nil), agent.NewRegistry(), m, quiet)
	logs := &syncBuffer{}
	gw := gateway.New(gateway.Config{}, store, a, m, slog.New(slog.NewTextHandler(logs, nil)))
	ch := newRecorder("slack")
	gw.Register(ch)
	gw.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := gw.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	for i, text := range []string{"a secret question", "/help"} {
		if err := gw.Submit(context.Background(), msg("", "E"+text, text)); err != nil {
			t.Fatal(err)
		}
		ch.wait(t, i+1)
	}
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "turn answered") {
			lines = append(lines, l)
		}
	}
	want := regexp.MustCompile(`level=INFO msg="turn answered" (component=gateway )?channel=slack conversation=slack:T1:C1 duration=\S+ outcome=ok tokens=[1-9]\d*$`)
	if len(lines) != 1 || !want.MatchString(lines[0]) {
		t.Fatalf("turn lines %q; want one matching %s", lines, want)
	}
	if strings.Contains(logs.String(), "secret") {
		t.Errorf("the log holds what was said:\n%s", logs.String())
	}
}
