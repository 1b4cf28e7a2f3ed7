package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/gateway/quota"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
	"github.com/prometheus/client_golang/prometheus/testutil"
	openai "github.com/sashabaranov/go-openai"
)

// replicas are gateways sharing one Redis, as replicas of a deployment
// do, answering through one model and one channel.
type replicas struct {
	gws     []*gateway.Gateway
	metrics []*metrics.Metrics
	model   *openaitest.Server
	ch      *recorder
	redis   *redistest.Redis
}

func newReplicas(t *testing.T, n int, pol policy.Config) *replicas {
	t.Helper()
	r := redistest.New(t)
	rs := &replicas{model: openaitest.New(t), ch: newRecorder("slack"), redis: r}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for range n {
		store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Second})
		m := metrics.New()
		a := agent.New(agent.Config{Model: "test", Timeout: 5 * time.Second, MaxRetries: 1, BackoffBase: time.Millisecond},
			agent.NewClient(rs.model.URL(), "sk-test", nil), agent.NewRegistry(), m, log)
		gw := gateway.New(gateway.Config{Policy: policy.New(pol), Quotas: quota.New(r.Client, r.Prefix)}, store, a, m, log)
		gw.Register(rs.ch)
		gw.Start()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := gw.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
		rs.gws, rs.metrics = append(rs.gws, gw), append(rs.metrics, m)
	}
	return rs
}

// refusals sums the quota refusals of every replica for limit.
func (rs *replicas) refusals(limit string) int {
	n := 0.0
	for _, m := range rs.metrics {
		n += testutil.ToFloat64(m.QuotaRefusals.WithLabelValues("slack", limit))
	}
	return int(n)
}

// answers are the replies that are not notices.
func answers(got []sent) (answered, notices []sent) {
	for _, s := range got {
		if s.reply.Notice {
			notices = append(notices, s)
		} else {
			answered = append(answered, s)
		}
	}
	return answered, notices
}

// flood submits msgs at once, spread over the replicas, and waits until
// each was either answered or refused.
func (rs *replicas) flood(t *testing.T, msgs []channels.Message, limit string, wantAnswers int) []sent {
	t.Helper()
	var wg sync.WaitGroup
	for i, m := range msgs {
		wg.Go(func() {
			if err := rs.gws[i%len(rs.gws)].Submit(context.Background(), m); err != nil {
				t.Errorf("Submit: %v", err)
			}
		})
	}
	wg.Wait()
	until(t, "every message answered or refused", func() bool {
		return rs.model.RequestCount()+rs.refusals(limit) >= len(msgs)
	})
	// The answers are sent after the model's request: wait for them too.
	rs.ch.wait(t, wantAnswers)
	until(t, "the answers sent", func() bool {
		a, _ := answers(rs.ch.snapshot())
		return len(a) >= wantAnswers
	})
	return rs.ch.snapshot()
}

func (r *recorder) snapshot() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sent(nil), r.got...)
}

// TestUserRateLimitHoldsAcrossReplicas: a user flooding two replicas at
// once, each message in a conversation of its own so that they all run in
// parallel, gets exactly limits.user_per_minute answers; the rest never
// reach the model, and the user is told once, not at every message.
// Another user of the same workspace is not affected.
func TestUserRateLimitHoldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	rs := newReplicas(t, 2, policy.Config{Default: config.Level{Limits: config.Limits{UserPerMinute: new(5)}}})
	var msgs []channels.Message
	for i := range 20 {
		m := msg(fmt.Sprintf("t%d", i), fmt.Sprintf("E%d", i), fmt.Sprintf("question %d", i))
		msgs = append(msgs, m)
	}
	got := rs.flood(t, msgs, quota.User, 5)
	answered, notices := answers(got)
	if len(answered) != 5 || rs.model.RequestCount() != 5 {
		t.Errorf("answered %d, model requests %d; want 5 each (limits.user_per_minute: 5)", len(answered), rs.model.RequestCount())
	}
	if rs.refusals(quota.User) != 15 {
		t.Errorf("refusals = %d, want 15", rs.refusals(quota.User))
	}
	if len(notices) != 1 || !strings.Contains(notices[0].reply.Text, "faster than I can answer") {
		t.Errorf("notices = %+v, want exactly one rate notice", notices)
	}
	// A refused message stores nothing: its conversation has no history.
	for _, s := range got {
		if s.reply.Notice {
			h, err := sessions.NewRedis(rs.redis.Client, sessions.Options{Prefix: rs.redis.Prefix}).History(context.Background(), s.msg.ConversationKey())
			if err != nil || len(h) != 0 {
				t.Errorf("history of a refused message = %v, %v; want none", h, err)
			}
		}
	}

	other := msg("t-other", "E-other", "me too")
	other.User = "U2"
	if err := rs.gws[1].Submit(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	until(t, "U2 answered", func() bool {
		a, _ := answers(rs.ch.snapshot())
		return len(a) == 6
	})
}

// TestWorkspaceRateLimitHoldsAcrossReplicas: many users of one workspace,
// each under their own limit, together get no more than
// limits.workspace_per_minute answers; each refused user is told once.
func TestWorkspaceRateLimitHoldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	rs := newReplicas(t, 2, policy.Config{Default: config.Level{Limits: config.Limits{UserPerMinute: new(10), WorkspacePerMinute: new(4)}}})
	var msgs []channels.Message
	for i := range 12 {
		m := msg(fmt.Sprintf("t%d", i), fmt.Sprintf("E%d", i), "hello")
		m.User = fmt.Sprintf("U%d", i%6)
		msgs = append(msgs, m)
	}
	got := rs.flood(t, msgs, quota.Workspace, 4)
	answered, notices := answers(got)
	if len(answered) != 4 || rs.model.RequestCount() != 4 {
		t.Errorf("answered %d, model requests %d; want 4 each (limits.workspace_per_minute: 4)", len(answered), rs.model.RequestCount())
	}
	told := map[string]int{}
	for _, n := range notices {
		told[n.msg.User]++
		if !strings.Contains(n.reply.Text, "this workspace") {
			t.Errorf("notice = %q, want the workspace notice", n.reply.Text)
		}
	}
	for u, n := range told {
		if n != 1 {
			t.Errorf("user %s told %d times, want once", u, n)
		}
	}
	if rs.refusals(quota.Workspace) != 8 {
		t.Errorf("workspace refusals = %d, want 8", rs.refusals(quota.Workspace))
	}
	// A message of another workspace is counted apart.
	other := msg("t-x", "E-x", "hi")
	other.Workspace = "T2"
	if err := rs.gws[0].Submit(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	until(t, "the other workspace answered", func() bool { return rs.model.RequestCount() == 5 })
}

// TestTokenBudgetHoldsAcrossReplicas: once a user's turns reported
// budget.tokens_per_user_day tokens, their next message, on any replica,
// is refused before the model with a notice, and the usage is reported in
// the budget histogram.
func TestTokenBudgetHoldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	rs := newReplicas(t, 2, policy.Config{Default: config.Level{Budget: config.Budget{TokensPerUserDay: new(int64(100))}}})
	rs.model.Script(
		openaitest.Text("first answer").WithUsage(openai.Usage{PromptTokens: 40, CompletionTokens: 20, TotalTokens: 60}),
		openaitest.Text("second answer").WithUsage(openai.Usage{PromptTokens: 50, CompletionTokens: 10, TotalTokens: 60}),
	)
	if err := rs.gws[0].Submit(context.Background(), msg("a", "B1", "one")); err != nil {
		t.Fatal(err)
	}
	rs.ch.wait(t, 1)
	if err := rs.gws[1].Submit(context.Background(), msg("b", "B2", "two")); err != nil {
		t.Fatal(err)
	}
	rs.ch.wait(t, 2) // 60 < 100: still admitted, and now 120
	if err := rs.gws[0].Submit(context.Background(), msg("c", "B3", "three")); err != nil {
		t.Fatal(err)
	}
	got := rs.ch.wait(t, 3)
	if !got[2].reply.Notice || !strings.Contains(got[2].reply.Text, "today's share") {
		t.Fatalf("third reply = %+v, want the budget notice", got[2].reply)
	}
	if rs.model.RequestCount() != 2 {
		t.Errorf("model requests = %d, want 2: a message over budget never reaches the model", rs.model.RequestCount())
	}
	spent, err := quota.New(rs.redis.Client, rs.redis.Prefix).Spent(context.Background(), quota.Subject{Channel: "slack", Workspace: "T1", User: "U1"})
	if err != nil || spent != 120 {
		t.Errorf("spent = %d, %v; want 120", spent, err)
	}
	observed := 0
	for _, m := range rs.metrics {
		observed += testutil.CollectAndCount(m.BudgetUsed)
	}
	if observed != 2 || rs.refusals(quota.Budget) != 1 {
		t.Errorf("budget series = %d (want one per replica that counted), refusals = %d (want 1)", observed, rs.refusals(quota.Budget))
	}
	// Another user has their own budget.
	other := msg("d", "B4", "mine")
	other.User = "U2"
	if err := rs.gws[1].Submit(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	until(t, "U2 answered", func() bool { return rs.model.RequestCount() == 3 })
}
