package gateway_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/channels/wechat"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

// newILinkReplica is an outboxReplica with the real WeChat adapter
// (iLink). Its adapter does not poll: the test submits the message the
// poll would have.
func newILinkReplica(t *testing.T, r *redistest.Redis, model *openaitest.Server, name string) *outboxReplica {
	t.Helper()
	return newOutboxReplica(t, r, model, gateway.Config{}, nil, func(m *metrics.Metrics, log *slog.Logger) (channels.Channel, error) {
		return wechat.New(wechat.Config{}, wechat.Options{
			State: wechat.NewRedisState(r.Client, r.Prefix), Client: r.Client, Prefix: r.Prefix, HTTP: wechattest.ReplicaClient(name),
			RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond,
		}, m, log)
	})
}

// TestILinkFinalPostFailingIsDeliveredByTheOtherReplica: iLink answers
// every sendmessage with 503, so the answer waits in the outbox; once its
// replica is stopped and iLink recovers, the other replica sends it,
// exactly once, with the user's context token, and the model is not asked
// again.
func TestILinkFinalPostFailingIsDeliveredByTheOtherReplica(t *testing.T) {
	t.Parallel()
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
