package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sashabaranov/go-openai"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/gateway/outbox"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// outboxReplica is one gateway with a real channel adapter and an outbox,
// on the Redis, model and fake platform its test shares between replicas.
type outboxReplica struct {
	gw      *gateway.Gateway
	store   *sessions.RedisStore
	metrics *metrics.Metrics
	channel string // its adapter's name
	stopped bool
}

// newOutboxReplica starts a gateway configured as gcfg (its Outbox set
// here, its chats paced as pace) with the adapter newChannel makes.
func newOutboxReplica(t *testing.T, r *redistest.Redis, model *openaitest.Server, gcfg gateway.Config, pace map[string]channels.Pace,
	newChannel func(*metrics.Metrics, *slog.Logger) (channels.Channel, error)) *outboxReplica {
	t.Helper()
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Second, MaxMessages: 1000})
	a := agent.New(agent.Config{Model: "test", Timeout: 5 * time.Second, MaxRetries: 1, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond},
		agent.NewClient(model.URL(), "sk-test", nil), agent.NewRegistry(), m, log)
	gcfg.Outbox = outbox.New(r.Client, r.Prefix, outbox.Config{Lease: 2 * time.Second, Poll: 20 * time.Millisecond,
		MinWait: 20 * time.Millisecond, MaxWait: 100 * time.Millisecond, Pace: pace}, m, log)
	gw := gateway.New(gcfg, store, a, m, log)
	ch, err := newChannel(m, log)
	if err != nil {
		t.Fatal(err)
	}
	gw.Register(ch)
	gw.Start()
	rp := &outboxReplica{gw: gw, store: store, metrics: m, channel: ch.Name()}
	t.Cleanup(func() { rp.stop(t) })
	return rp
}

func (rp *outboxReplica) stop(t *testing.T) {
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

func (rp *outboxReplica) delivered(outcome string) float64 {
	return testutil.ToFloat64(rp.metrics.Deliveries.WithLabelValues(rp.channel, outcome))
}

// newSlackReplica paces Slack's chats at 100 posts a second, unless
// paced asks for Slack's own pace. Its answers are posted when complete
// (no live reply), through the outbox path these tests are about.
func newSlackReplica(t *testing.T, r *redistest.Redis, model *openaitest.Server, fake *slacktest.Server, paced ...bool) *outboxReplica {
	t.Helper()
	return newSlackReplicaWith(t, r, model, fake, len(paced) > 0 && paced[0], false)
}

// newSlackReplicaWith is newSlackReplica, with live replies when live.
func newSlackReplicaWith(t *testing.T, r *redistest.Redis, model *openaitest.Server, fake *slacktest.Server, paced, live bool) *outboxReplica {
	t.Helper()
	return newSlackReplicaConfig(t, r, model, fake, paced, live, gateway.Config{})
}

// newSlackReplicaConfig is newSlackReplicaWith on a gateway configured as
// gcfg (its Outbox set here).
func newSlackReplicaConfig(t *testing.T, r *redistest.Redis, model *openaitest.Server, fake *slacktest.Server, paced, live bool, gcfg gateway.Config) *outboxReplica {
	t.Helper()
	pace := map[string]channels.Pace{slack.Name: {Every: 10 * time.Millisecond}}
	if paced {
		pace = nil
	}
	return newOutboxReplica(t, r, model, gcfg, pace, func(m *metrics.Metrics, log *slog.Logger) (channels.Channel, error) {
		// Burst 1: paced, every post keeps Slack's second.
		return slack.New(slack.Config{BotToken: slacktest.BotToken, APIURL: fake.APIURL(), PostBurst: 1}, slack.Options{RetryWait: 5 * time.Millisecond, NoLiveReplies: !live, UpdateEvery: 20 * time.Millisecond}, m, log)
	})
}

// TestFinalPostFailingIsDeliveredByTheOtherReplica: the answer's post
// gets 5xx; the turn is written once, the reply waits in the outbox, and
// after its replica is stopped the other replica posts it, exactly once.
func TestFinalPostFailingIsDeliveredByTheOtherReplica(t *testing.T) {
	t.Parallel()
	r, model, fake := redistest.New(t), openaitest.New(t), slacktest.New(t)
	a := newSlackReplica(t, r, model, fake)
	var fails []slacktest.Failure
	for range 1000 {
		fails = append(fails, slacktest.Failure{Status: 503})
	}
	fake.Fail("chat.postMessage", fails...)
	m := channels.Message{ID: "Ev1", Channel: slack.Name, Workspace: slacktest.TeamID, Chat: "C1", Thread: "1700000000.000100",
		User: "U1", Text: "hello", Meta: map[string]string{slack.MetaThreadTS: "1700000000.000100"}}
	if err := a.gw.Submit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	slacktest.WaitFor(t, "a try from the outbox", 30*time.Second, func() bool {
		return a.delivered(metrics.DeliveryRetried) >= 2
	})
	a.stop(t)
	fake.Heal("chat.postMessage")
	if len(fake.Posts()) != 0 {
		t.Fatal("a post went through while Slack failed")
	}
	b := newSlackReplica(t, r, model, fake)
	slacktest.WaitFor(t, "the other replica to deliver", 30*time.Second, func() bool {
		return b.delivered(metrics.DeliverySent) == 1
	})
	posts := fake.Posts()
	if len(posts) != 1 || posts[0].Text != "echo: hello" || posts[0].ThreadTS != "1700000000.000100" {
		t.Fatalf("posts = %+v; want the answer once, in the thread", posts)
	}
	history, err := b.store.History(context.Background(), m.ConversationKey())
	if err != nil {
		t.Fatal(err)
	}
	if len(history) != 2 {
		t.Errorf("history has %d messages, want the one turn (2)", len(history))
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("the model answered %d times; delivery must not rerun the turn", n)
	}
}

// TestTwoGatewaysShareAChatsPace: two replicas answer two threads of one
// Slack channel at once, each answer split in two; the channel's budget
// of about one post a second holds for both together, measured from the
// fake Slack's receive times.
func TestTwoGatewaysShareAChatsPace(t *testing.T) {
	t.Parallel()
	r, fake := redistest.New(t), slacktest.New(t)
	long := strings.Repeat("a", slack.MaxMessageBytes-100) + "\n\n" + strings.Repeat("b", slack.MaxMessageBytes-100)
	model := openaitest.New(t, openaitest.WithResponder(func(openai.ChatCompletionRequest) openaitest.Step { return openaitest.Text(long) }))
	reps := []*outboxReplica{newSlackReplica(t, r, model, fake, true), newSlackReplica(t, r, model, fake, true)}
	for i, rp := range reps {
		ts := fmt.Sprintf("1700000000.00010%d", i)
		m := channels.Message{ID: "Ev" + ts, Channel: slack.Name, Workspace: slacktest.TeamID, Chat: "C1", Thread: ts,
			User: "U1", Text: "hello", Meta: map[string]string{slack.MetaThreadTS: ts}}
		if err := rp.gw.Submit(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	slacktest.WaitFor(t, "both answers", 30*time.Second, func() bool { return len(fake.Posts()) >= 4 })
	posts := fake.Posts()
	if len(posts) != 4 {
		t.Fatalf("%d posts, want 4", len(posts))
	}
	for _, p := range posts {
		n := 0
		for _, q := range posts {
			if !q.At.Before(p.At) && q.At.Sub(p.At) < time.Second {
				n++
			}
		}
		// One a second, with room for a slow scheduler; unpaced, all four
		// land within milliseconds.
		if n > 2 {
			t.Fatalf("%d posts within one second of one channel; the replicas burst past Slack's pace", n)
		}
	}
}
