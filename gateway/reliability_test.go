package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/channeltest"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// errInjected is a Redis failure a test injects.
var errInjected = errors.New("redis: i/o timeout (injected)")

// script names the store's scripts by the keys they are given.
type script string

const (
	claimScript    script = "claim"    // KEYS lock, inbox, history, approval, live, room, ambient
	completeScript script = "complete" // KEYS history, inbox, lock, receipt, live
	acceptScript   script = "accept"   // KEYS inbox, …
	lockScript     script = "lock"     // renew and release: KEYS lock
)

func scriptOf(cmd redis.Cmder) script {
	args := cmd.Args()
	if len(args) < 4 {
		return ""
	}
	if name := fmt.Sprint(args[0]); name != "evalsha" && name != "eval" {
		return ""
	}
	first, _ := args[3].(string)
	switch {
	case strings.HasSuffix(first, ":lock") && fmt.Sprint(args[2]) == "7":
		return claimScript
	case strings.HasSuffix(first, ":lock"):
		return lockScript
	case strings.HasSuffix(first, ":history") && len(args) > 6 && strings.Contains(fmt.Sprint(args[6]), ":done:"):
		return completeScript
	case strings.HasSuffix(first, ":inbox"):
		return acceptScript
	}
	return ""
}

// faults fails the runs of the target scripts while failing is set, and
// counts the runs of every script.
type faults struct {
	targets map[script]bool
	failing atomic.Bool
	mu      sync.Mutex
	runs    map[script]int
	failed  int
}

func newFaults(r *redistest.Redis, targets ...script) *faults {
	f := &faults{targets: map[script]bool{}, runs: map[script]int{}}
	for _, s := range targets {
		f.targets[s] = true
	}
	r.Client.AddHook(f)
	return f
}

func (f *faults) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *faults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (f *faults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s := scriptOf(cmd)
		f.mu.Lock()
		f.runs[s]++
		fail := f.targets[s] && f.failing.Load()
		if fail {
			f.failed++
		}
		f.mu.Unlock()
		if fail {
			cmd.SetErr(errInjected)
			return errInjected
		}
		return next(ctx, cmd)
	}
}

func (f *faults) count(s script) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[s]
}

func (f *faults) failures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// until polls cond until it holds or 10 s pass.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestATurnIsNeverSilentlyLost (issue 12, item 7): a Redis failure while a
// turn is written is retried while the lock is ours; if it outlasts the
// lock, the message stays queued, its user hears once that the answer is
// delayed, and it is answered when Redis is back — never acknowledged
// without its turn, never written twice.
func TestATurnIsNeverSilentlyLost(t *testing.T) {
	t.Parallel()
	t.Run("a short failure is retried while the lock is held", func(t *testing.T) {
		rg := newRig(t, gateway.Config{RetryMin: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond})
		f := newFaults(rg.redis, completeScript)
		f.failing.Store(true)
		rg.submit(t, msg("t", "E1", "hello"))
		until(t, "three failed writes", func() bool { return f.failures() >= 3 })
		f.failing.Store(false)
		got := rg.ch.wait(t, 1)
		if got[0].reply.Text != "echo: hello" || got[0].reply.Notice {
			t.Fatalf("reply = %+v; want the answer, no apology", got[0].reply)
		}
		assertOneTurn(t, rg, "t", "hello")
		if n := rg.model.RequestCount(); n != 1 {
			t.Fatalf("model asked %d times; want once (the turn was only written late)", n)
		}
	})
	t.Run("a failure that outlasts the lock leaves the message queued", func(t *testing.T) {
		// The rig's lock TTL is 1 s: failing for longer makes the lock
		// uncertain, so the turn must not be written by this attempt.
		rg := newRig(t, gateway.Config{RetryMin: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond})
		f := newFaults(rg.redis, completeScript, lockScript) // renewals fail too, as in an outage
		f.failing.Store(true)
		rg.submit(t, msg("t", "E1", "hello"))
		got := rg.ch.wait(t, 1)
		if !got[0].reply.Notice || !strings.Contains(got[0].reply.Text, "delayed") {
			t.Fatalf("first reply = %+v; want the apology", got[0].reply)
		}
		conv := msg("t", "", "").ConversationKey()
		if n := rg.redis.Client.LLen(context.Background(), rg.redis.Prefix+"conv:{"+conv+"}:inbox").Val(); n != 1 {
			t.Fatalf("inbox holds %d messages while the turn cannot be written; want the message still queued", n)
		}
		// The conversation is tried again (and fails again) without a second apology.
		before := f.failures()
		until(t, "another attempt", func() bool { return f.failures() > before+2 })
		f.failing.Store(false)
		got = rg.ch.wait(t, 2)
		if got[1].reply.Text != "echo: hello" {
			t.Fatalf("replies = %+v; want the apology once, then the answer", got)
		}
		assertOneTurn(t, rg, "t", "hello")
		// An apology would have come before the answer that was written.
		if n := len(rg.ch.wait(t, 2)); n != 2 {
			t.Fatalf("%d replies; want the apology and the answer only", n)
		}
	})
}

// assertOneTurn checks that thread's history holds text's turn exactly once
// and that nothing is left queued.
func assertOneTurn(t *testing.T, rg *rig, thread, text string) {
	t.Helper()
	conv := msg(thread, "", "").ConversationKey()
	h, err := rg.store.History(context.Background(), conv)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[0].Content != text || h[1].Content != "echo: "+text {
		t.Fatalf("history = %+v; want the turn of %q once", h, text)
	}
	until(t, "an empty inbox", func() bool {
		return rg.redis.Client.LLen(context.Background(), rg.redis.Prefix+"conv:{"+conv+"}:inbox").Val() == 0
	})
}

// TestBoundedGrowth_ALockedConversationPinsNoWorker (issue 12, item 17): a
// conversation another replica holds does not keep a worker polling; with
// one worker, another conversation is answered at once, and the held one is
// tried again only when the other holder's lock would expire.
func TestBoundedGrowth_ALockedConversationPinsNoWorker(t *testing.T) {
	t.Parallel()
	rg := newRig(t, gateway.Config{Workers: 1})
	f := newFaults(rg.redis)
	held := msg("held", "", "").ConversationKey()
	rg.redis.Client.Set(context.Background(), rg.redis.Prefix+"conv:{"+held+"}:lock", "other-replica", time.Minute)
	rg.submit(t, msg("held", "H1", "waiting"))
	until(t, "the held conversation's claim", func() bool { return f.count(claimScript) >= 1 })
	rg.submit(t, msg("free", "F1", "hello"))
	got := rg.ch.wait(t, 1)
	if got[0].msg.Thread != "free" {
		t.Fatalf("first reply went to %q; want the free conversation", got[0].msg.Thread)
	}
	claims := f.count(claimScript)
	// An observation window, not a synchronisation: the old gateway polled
	// the held lock every 200 ms from a pinned worker.
	time.Sleep(time.Second)
	if n := f.count(claimScript) - claims; n != 0 {
		t.Fatalf("the held conversation was claimed %d more times within a second; want none until its lock would expire", n)
	}
}

// TestABusyConversationGivesWayToTheOthers (issue 15, item 1): a worker
// serves one turn of a conversation and then the conversations that were
// waiting, not the whole backlog of the first.
func TestABusyConversationGivesWayToTheOthers(t *testing.T) {
	t.Parallel()
	rg := newRig(t, gateway.Config{Workers: 1, QueueLimit: 100})
	rg.model.Script(openaitest.Delay(300 * time.Millisecond)) // the first turn holds the worker
	for i := range 5 {
		rg.submit(t, msg("busy", fmt.Sprintf("B%d", i), fmt.Sprintf("busy %d", i)))
	}
	rg.submit(t, msg("quiet", "Q1", "me too"))
	got := rg.ch.wait(t, 6)
	order := make([]string, len(got))
	for i, s := range got {
		order[i] = s.msg.Thread
	}
	if order[1] != "quiet" {
		t.Fatalf("replies went to %v; want the quiet conversation answered second, right after the turn that was running", order)
	}
}

// TestRedisFailuresRetryInsteadOfDropping (issue 15, item 6): a claim that
// fails is tried again with backoff, not left to the sweep; and as soon as
// Redis answers after a failure, the sweep runs and serves what is queued,
// saying what it found without blaming another replica.
func TestRedisFailuresRetryInsteadOfDropping(t *testing.T) {
	t.Parallel()
	var logs channeltest.LogBuffer
	r := redistest.New(t)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Second})
	model := openaitest.New(t)
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(&logs, nil))
	a := agent.New(agent.Config{Model: "test", Timeout: 5 * time.Second}, agent.NewClient(model.URL(), "sk-test", nil), agent.NewRegistry(), m, log)
	gw := gateway.New(gateway.Config{SweepEvery: time.Hour, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond}, store, a, m, log)
	ch := newRecorder("slack")
	gw.Register(ch)
	f := newFaults(r, claimScript)
	gw.Start()
	t.Cleanup(func() { gw.Shutdown(context.Background()) })

	// A message another replica accepted and left: only a sweep finds it.
	left := msg("left", "", "left behind")
	left.Received = time.Now()
	if _, err := store.Accept(context.Background(), left.ConversationKey(), sessions.Arrival{Item: mustItem(t, left), Limit: 10}); err != nil {
		t.Fatal(err)
	}
	f.failing.Store(true)
	if err := gw.Submit(context.Background(), msg("t", "E1", "during the outage")); err != nil {
		t.Fatal(err)
	}
	until(t, "failed claims", func() bool { return f.failures() >= 3 })
	f.failing.Store(false)
	got := ch.wait(t, 2)
	texts := map[string]bool{}
	for _, s := range got {
		texts[s.reply.Text] = true
	}
	if !texts["echo: during the outage"] || !texts["echo: left behind"] {
		t.Fatalf("replies %+v; want both messages answered without waiting for the hourly sweep", got)
	}
	out := logs.String()
	if strings.Contains(out, "another replica") || !strings.Contains(out, "sweep found conversations with queued messages and no lock holder") {
		t.Fatalf("sweep log:\n%s", out)
	}
}

func mustItem(t *testing.T, m interface{}) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"msg": m, "nonce": "n-" + fmt.Sprint(time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
