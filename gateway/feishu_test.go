package gateway_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sashabaranov/go-openai"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

// newFeishuReplica is an outboxReplica with the real Feishu adapter.
func newFeishuReplica(t *testing.T, r *redistest.Redis, model *openaitest.Server, fake *feishutest.Server) *outboxReplica {
	t.Helper()
	return newFeishuReplicaConfig(t, r, model, fake, gateway.Config{})
}

// newFeishuReplicaConfig is newFeishuReplica on a gateway configured as
// gcfg. Its live cards take new text every 20 ms, so that a test's
// answer written over a fraction of a second is shown as it comes.
func newFeishuReplicaConfig(t *testing.T, r *redistest.Redis, model *openaitest.Server, fake *feishutest.Server, gcfg gateway.Config) *outboxReplica {
	t.Helper()
	return newOutboxReplica(t, r, model, gcfg, nil, func(m *metrics.Metrics, log *slog.Logger) (channels.Channel, error) {
		return feishu.New(feishu.Config{AppID: "cli_" + strings.NewReplacer("/", "_").Replace(t.Name()), AppSecret: "secret",
			VerificationToken: "vtoken", BaseURL: fake.URL, Mode: feishu.ModeWebhook, ReplyInThread: true, FollowThreads: true,
			StreamEvery: 20 * time.Millisecond},
			feishu.Options{Redis: r.Client, Prefix: r.Prefix, RetryBase: 5 * time.Millisecond, ChatInterval: time.Millisecond,
				CardUpdateInterval: 5 * time.Millisecond, TypingEmoji: "-"}, m, log)
	})
}

func feishuQuestion(text string) channels.Message {
	return channels.Message{ID: "om_q", Channel: feishu.Name, Workspace: "tenant1", Chat: "oc_g", Thread: "om_q",
		User: "ou_alice", Text: text, Received: time.Now(), Meta: map[string]string{
			feishu.MetaMessageID: "om_q", feishu.MetaChatType: "group", feishu.MetaThreadKey: "oc_g:om_q", feishu.MetaInThread: "1"}}
}

// TestFeishuStreamedAnswerInACard: a model writing slowly is shown in a
// CardKit card as it writes, and the card is left with exactly the stored
// answer, the only message of the reply.
func TestFeishuStreamedAnswerInACard(t *testing.T) {
	t.Parallel()
	const answer = "Roll back the deploy first, then watch the error rate for ten minutes, and tell the channel when it is calm."
	r, fake := redistest.New(t), feishutest.New(t)
	model := openaitest.New(t, openaitest.WithChunkDelay(10*time.Millisecond), openaitest.WithChunkRunes(4),
		openaitest.WithResponder(func(openai.ChatCompletionRequest) openaitest.Step { return openaitest.Text(answer) }))
	rp := newFeishuReplica(t, r, model, fake)
	m := feishuQuestion("what now?")
	if err := rp.gw.Submit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	slacktest.WaitFor(t, "the card to be complete", 30*time.Second, func() bool { return len(fake.Sent()) == 1 })
	h, err := rp.store.History(context.Background(), m.ConversationKey())
	if err != nil || len(h) != 2 || h[1].Content != answer {
		t.Fatalf("history %+v, %v", h, err)
	}
	vis := fake.Visible()
	if len(vis) != 1 || vis[0].Text != h[1].Content || vis[0].CardID == "" || vis[0].Streaming {
		t.Fatalf("visible %+v; want one closed card with the stored answer", vis)
	}
	updates := 0
	for _, c := range fake.Calls() {
		if c.Op == feishutest.OpCardContent {
			updates++
		}
	}
	if updates < 2 {
		t.Errorf("%d card updates; want the answer shown as it was written", updates)
	}
	var hm dto.Metric
	if err := rp.metrics.ReplyFirstVisible.WithLabelValues(feishu.Name).(prometheus.Metric).Write(&hm); err != nil || hm.GetHistogram().GetSampleCount() != 1 {
		t.Errorf("first visible observations: %d (%v); want 1", hm.GetHistogram().GetSampleCount(), err)
	}
}

// TestFeishuFinalPostFailingIsDeliveredByTheOtherReplica: every message
// Feishu is asked to make fails with 503, so the live card never shows and
// the answer goes to the outbox; once its replica is stopped and Feishu
// recovers, the other replica posts it, exactly once, and the thread
// counts as answered.
func TestFeishuFinalPostFailingIsDeliveredByTheOtherReplica(t *testing.T) {
	t.Parallel()
	r, model, fake := redistest.New(t), openaitest.New(t), feishutest.New(t)
	var fails []feishutest.Failure
	for range 1000 {
		fails = append(fails, feishutest.Failure{Status: 503, Code: 1000004, Msg: "internal error"})
	}
	fake.Fail("reply", fails...)
	a := newFeishuReplica(t, r, model, fake)
	m := feishuQuestion("hello")
	if err := a.gw.Submit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	slacktest.WaitFor(t, "a try from the outbox", 30*time.Second, func() bool {
		return a.delivered(metrics.DeliveryRetried) >= 2
	})
	a.stop(t)
	fake.Heal("reply")
	if len(fake.Sent()) != 0 {
		t.Fatal("a message went through while Feishu failed")
	}
	b := newFeishuReplica(t, r, model, fake)
	slacktest.WaitFor(t, "the other replica to deliver", 30*time.Second, func() bool {
		return b.delivered(metrics.DeliverySent) == 1
	})
	sent := fake.Sent()
	if len(sent) != 1 || sent[0].Text != "echo: hello" || sent[0].ReplyTo != "om_q" || !sent[0].ReplyInThread {
		t.Fatalf("sent %+v; want the answer once, in the thread", sent)
	}
	if vis := fake.Visible(); len(vis) != 1 {
		t.Fatalf("visible %+v; want the answer alone", vis)
	}
	if n, err := r.Client.Exists(context.Background(), r.Prefix+"feishu:thread:oc_g:om_q").Result(); err != nil || n != 1 {
		t.Errorf("the thread answered from the outbox is not remembered (%d, %v)", n, err)
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("the model answered %d times; delivery must not rerun the turn", n)
	}
}
