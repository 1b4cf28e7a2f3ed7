package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/channels/wechat"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/gateway/outbox"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// iLinkReplica is one gateway with the real WeChat adapter (iLink) and an
// outbox, on the Redis, model and fake iLink its test shares. Its adapter
// does not poll: the test submits the message the poll would have.
type iLinkReplica struct {
	gw      *gateway.Gateway
	metrics *metrics.Metrics
	stopped bool
}

func newILinkReplica(t *testing.T, r *redistest.Redis, model *openaitest.Server, name string) *iLinkReplica {
	t.Helper()
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Second, MaxMessages: 1000})
	a := agent.New(agent.Config{Model: "test", Timeout: 5 * time.Second, MaxRetries: 1, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond},
		agent.NewClient(model.URL(), "sk-test", nil), agent.NewRegistry(), m, log)
	ob := outbox.New(r.Client, r.Prefix, outbox.Config{Lease: 2 * time.Second, Poll: 20 * time.Millisecond, MinWait: 20 * time.Millisecond, MaxWait: 100 * time.Millisecond}, m, log)
	gw := gateway.New(gateway.Config{Outbox: ob}, store, a, m, log)
	ch, err := wechat.New(wechat.Config{}, wechat.Options{
		State: wechat.NewRedisState(r.Client, r.Prefix), Client: r.Client, Prefix: r.Prefix, HTTP: wechattest.ReplicaClient(name),
		RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond,
	}, m, log)
	if err != nil {
		t.Fatal(err)
	}
	gw.Register(ch)
	gw.Start()
	rp := &iLinkReplica{gw: gw, metrics: m}
	t.Cleanup(func() { rp.stop(t) })
	return rp
}

func (rp *iLinkReplica) stop(t *testing.T) {
	if rp.stopped {
		return
	}
	rp.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rp.gw.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

func (rp *iLinkReplica) delivered(outcome string) float64 {
	return testutil.ToFloat64(rp.metrics.Deliveries.WithLabelValues(wechat.Name, outcome))
}

// TestILinkFinalPostFailingIsDeliveredByTheOtherReplica: iLink answers
// every sendmessage with 503, so the answer waits in the outbox; once its
// replica is stopped and iLink recovers, the other replica sends it,
// exactly once, with the user's context token, and the model is not asked
// again.
func TestILinkFinalPostFailingIsDeliveredByTheOtherReplica(t *testing.T) {
	r, model, fake := redistest.New(t), openaitest.New(t), wechattest.NewILink(t)
	st := wechat.NewRedisState(r.Client, r.Prefix)
	if err := st.SaveAccount(context.Background(), wechat.Account{BotID: fake.BotID, Token: fake.Token(), BaseURL: fake.URL(), LoggedIn: time.Now()}); err != nil {
		t.Fatal(err)
	}
	statuses := make([]int, 10000)
	for i := range statuses {
		statuses[i] = 503
	}
	fake.ScriptSendStatus(statuses...)
	a := newILinkReplica(t, r, model, "A")
	m := channels.Message{ID: "ilink:1", Channel: wechat.Name, Workspace: fake.BotID, Chat: "alice@im.wechat",
		User: "alice@im.wechat", Text: "hello", DM: true, Received: time.Now(),
		Meta: map[string]string{"via": wechat.ViaILink, "context_token": "ctx-1"}}
	if err := a.gw.Submit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	slacktest.WaitFor(t, "a try from the outbox", 30*time.Second, func() bool {
		return a.delivered(metrics.DeliveryRetried) >= 2
	})
	a.stop(t)
	fake.ClearSendScript()
	b := newILinkReplica(t, r, model, "B")
	slacktest.WaitFor(t, "the other replica to deliver", 30*time.Second, func() bool {
		return b.delivered(metrics.DeliverySent) == 1
	})
	var ok []wechattest.Sent
	for _, s := range fake.Sends() {
		if s.Status == 0 && s.Ret == 0 {
			ok = append(ok, s)
		}
	}
	if len(ok) != 1 || ok[0].Text != "echo: hello" || ok[0].To != "alice@im.wechat" || ok[0].ContextToken != "ctx-1" || ok[0].Replica != "B" {
		t.Fatalf("sent %+v; want the answer once, from replica B, with the user's token", ok)
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("the model answered %d times; delivery must not rerun the turn", n)
	}
}
