package outbox_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/gateway/outbox"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

// replica is one Parley process's outbox and Slack adapter, on the Redis
// and the fake Slack the test shares between replicas.
type replica struct {
	o     *outbox.Outbox
	slack *slack.Adapter
	m     *metrics.Metrics

	cancel context.CancelFunc
	done   chan struct{}
}

// fastConfig keeps the tests' waits short: Slack's chats are paced at
// 100 posts a second, not its real one.
func fastConfig() outbox.Config {
	return outbox.Config{Lease: 2 * time.Second, Poll: 20 * time.Millisecond, MinWait: 20 * time.Millisecond, MaxWait: 100 * time.Millisecond,
		Pace: map[string]channels.Pace{slack.Name: {Every: 10 * time.Millisecond, Burst: 1}}}
}

func newReplica(t *testing.T, r *redistest.Redis, fake *slacktest.Server, cfg outbox.Config) *replica {
	t.Helper()
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	// Burst 1: the pace tests measure the spacing of every post; the
	// burst has a test of its own.
	a, err := slack.New(slack.Config{BotToken: slacktest.BotToken, APIURL: fake.APIURL(), PostBurst: 1}, slack.Options{RetryWait: 5 * time.Millisecond}, m, log)
	if err != nil {
		t.Fatal(err)
	}
	return &replica{o: outbox.New(r.Client, r.Prefix, cfg, m, log), slack: a, m: m}
}

// start runs the replica's outbox loop until stop (or the test's end).
func (rp *replica) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	rp.cancel, rp.done = cancel, make(chan struct{})
	go func() {
		defer close(rp.done)
		rp.o.Run(ctx, func(ch string) channels.Poster {
			if ch == slack.Name {
				return rp.slack
			}
			return nil
		})
	}()
	t.Cleanup(rp.stop)
}

// stop cancels the replica's loop — the process is gone — and waits for it.
func (rp *replica) stop() {
	rp.cancel()
	<-rp.done
}

func (rp *replica) deliveries(outcome string) float64 {
	return testutil.ToFloat64(rp.m.Deliveries.WithLabelValues(slack.Name, outcome))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func thread() channels.Message {
	return channels.Message{Channel: slack.Name, Workspace: slacktest.TeamID, Chat: "C1", Thread: "1700000000.000100",
		Meta: map[string]string{slack.MetaThreadTS: "1700000000.000100"}}
}

// longReply is an answer Slack gets in n posts: paragraphs each close to
// a post's size, so that every part is its own paragraph.
func longReply(n int) (channels.Reply, []string) {
	var paras []string
	for i := range n {
		paras = append(paras, strings.Repeat(string(rune('a'+i)), slack.MaxMessageBytes-100))
	}
	return channels.Reply{Text: strings.Join(paras, "\n\n")}, paras
}

func texts(posts []slacktest.Post) []string {
	var out []string
	for _, p := range posts {
		out = append(out, p.Text)
	}
	return out
}

// samePosts checks that the fake received exactly want, in order, once each.
func samePosts(t *testing.T, fake *slacktest.Server, want []string) {
	t.Helper()
	got := texts(fake.Posts())
	if len(got) != len(want) {
		t.Fatalf("%d posts, want %d (each part exactly once)", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("post %d is %.20q…, want %.20q…", i+1, got[i], want[i])
		}
	}
}

func TestDeliverPostsEveryPartInOrder(t *testing.T) {
	t.Parallel()
	r, fake := redistest.New(t), slacktest.New(t)
	rp := newReplica(t, r, fake, fastConfig())
	reply, parts := longReply(3)
	if got := rp.slack.Parts(thread(), reply); len(got) != 3 {
		t.Fatalf("the reply splits into %d parts, want 3", len(got))
	}
	if err := rp.o.Deliver(context.Background(), rp.slack, thread(), reply); err != nil {
		t.Fatal(err)
	}
	samePosts(t, fake, parts)
	for _, p := range fake.Posts() {
		if p.Channel != "C1" || p.ThreadTS != "1700000000.000100" {
			t.Errorf("posted to %s/%s, want the message's thread", p.Channel, p.ThreadTS)
		}
	}
	if rp.deliveries(metrics.DeliverySent) != 1 || rp.deliveries(metrics.DeliveryRetried) != 0 {
		t.Errorf("deliveries sent=%v retried=%v, want 1 and 0", rp.deliveries(metrics.DeliverySent), rp.deliveries(metrics.DeliveryRetried))
	}
	// The chat's pace slot expires by itself; nothing of the outbox stays.
	if n, _ := r.Client.Keys(context.Background(), r.Prefix+"outbox*").Result(); len(n) != 0 {
		t.Errorf("a delivered reply left keys in Redis: %v", n)
	}
}

// TestFailedPartIsDeliveredByTheOtherReplica: the last part of a split
// answer gets 5xx until the first replica is stopped; the second replica
// delivers it from the outbox, without posting the first part again.
func TestFailedPartIsDeliveredByTheOtherReplica(t *testing.T) {
	t.Parallel()
	r, fake := redistest.New(t), slacktest.New(t)
	a, b := newReplica(t, r, fake, fastConfig()), newReplica(t, r, fake, fastConfig())
	reply, parts := longReply(2)
	// Part 1 posts; part 2 fails until the first replica is gone.
	fails := []slacktest.Failure{{Pass: true}}
	for i := range 1000 {
		fails = append(fails, slacktest.Failure{Status: 500 + i%4})
	}
	fake.Fail("chat.postMessage", fails...)
	if err := a.o.Deliver(context.Background(), a.slack, thread(), reply); err != nil {
		t.Fatalf("Deliver = %v; a 5xx should queue the reply, not fail it", err)
	}
	if a.deliveries(metrics.DeliveryRetried) != 1 || a.deliveries(metrics.DeliverySent) != 0 {
		t.Fatalf("after the inline failure: retried=%v sent=%v, want 1 and 0", a.deliveries(metrics.DeliveryRetried), a.deliveries(metrics.DeliverySent))
	}
	if got := testutil.ToFloat64(a.m.OutboxPending); got != 1 {
		t.Errorf("parley_outbox_pending = %v, want 1", got)
	}
	a.start(t)
	slacktest.WaitFor(t, "the first replica's try from the outbox", 30*time.Second, func() bool {
		return fake.Count("chat.postMessage") >= 5
	})
	a.stop() // the first replica is gone
	fake.Heal("chat.postMessage")
	if a.deliveries(metrics.DeliverySent) != 0 {
		t.Fatal("the first replica delivered; the test wants the other one to")
	}
	b.start(t)
	slacktest.WaitFor(t, "the other replica to deliver the reply", 30*time.Second, func() bool {
		return b.deliveries(metrics.DeliverySent) == 1
	})
	samePosts(t, fake, parts)
	slacktest.WaitFor(t, "the outbox to empty", 10*time.Second, func() bool {
		return testutil.ToFloat64(b.m.OutboxPending) == 0
	})
}

func TestPermanentFailureIsCountedNotQueued(t *testing.T) {
	t.Parallel()
	r, fake := redistest.New(t), slacktest.New(t)
	rp := newReplica(t, r, fake, fastConfig())
	fake.Fail("chat.postMessage", slacktest.Failure{Error: "channel_not_found"})
	err := rp.o.Deliver(context.Background(), rp.slack, thread(), channels.Reply{Text: "hello"})
	var pe *channels.PostError
	if !errors.As(err, &pe) || pe.Retry {
		t.Fatalf("Deliver = %v; want the refusal, not retryable", err)
	}
	if rp.deliveries(metrics.DeliveryFailed) != 1 || rp.deliveries(metrics.DeliveryRetried) != 0 {
		t.Errorf("failed=%v retried=%v, want 1 and 0", rp.deliveries(metrics.DeliveryFailed), rp.deliveries(metrics.DeliveryRetried))
	}
	if n := fake.Count("chat.postMessage"); n != 1 {
		t.Errorf("%d tries of a refused post, want 1", n)
	}
	if strings.Contains(err.Error(), slacktest.BotToken) {
		t.Errorf("the error shows the token: %v", err)
	}
}

// TestItemPastMaxAgeIsCountedFailed: a reply that keeps failing is tried
// until outbox.max_age, then counted failed, kept as failed, and no longer
// pending.
func TestItemPastMaxAgeIsCountedFailed(t *testing.T) {
	t.Parallel()
	r, fake := redistest.New(t), slacktest.New(t)
	cfg := fastConfig()
	cfg.MaxAge = 300 * time.Millisecond
	rp := newReplica(t, r, fake, cfg)
	var always []slacktest.Failure
	for range 1000 {
		always = append(always, slacktest.Failure{Status: 500})
	}
	fake.Fail("chat.postMessage", always...)
	if err := rp.o.Deliver(context.Background(), rp.slack, thread(), channels.Reply{Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	rp.start(t)
	slacktest.WaitFor(t, "the reply to be counted failed", 30*time.Second, func() bool {
		return rp.deliveries(metrics.DeliveryFailed) == 1
	})
	if rp.deliveries(metrics.DeliverySent) != 0 || len(fake.Posts()) != 0 {
		t.Error("a failing reply was counted sent")
	}
	if rp.deliveries(metrics.DeliveryRetried) < 2 {
		t.Errorf("retried = %v, want a try from the outbox before giving up", rp.deliveries(metrics.DeliveryRetried))
	}
	slacktest.WaitFor(t, "the outbox to empty", 10*time.Second, func() bool {
		return testutil.ToFloat64(rp.m.OutboxPending) == 0
	})
}

// TestConcurrentReplicasPostEachPartOnce: many queued replies, three
// replicas claiming at once; every part reaches Slack exactly once.
func TestConcurrentReplicasPostEachPartOnce(t *testing.T) {
	t.Parallel()
	r, fake := redistest.New(t), slacktest.New(t)
	first := newReplica(t, r, fake, fastConfig())
	const replies = 6
	var fails []slacktest.Failure
	for range replies * 3 { // every reply's inline tries
		fails = append(fails, slacktest.Failure{Status: 503})
	}
	fake.Fail("chat.postMessage", fails...)
	var want []string
	for i := range replies {
		text := strings.Repeat("x", i+1)
		want = append(want, text)
		if err := first.o.Deliver(context.Background(), first.slack, thread(), channels.Reply{Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	reps := []*replica{first, newReplica(t, r, fake, fastConfig()), newReplica(t, r, fake, fastConfig())}
	for _, rp := range reps {
		wg.Add(1)
		go func() { defer wg.Done(); rp.start(t) }()
	}
	wg.Wait()
	slacktest.WaitFor(t, "every reply delivered", 30*time.Second, func() bool {
		n := 0.0
		for _, rp := range reps {
			n += rp.deliveries(metrics.DeliverySent)
		}
		return n == replies
	})
	got := map[string]int{}
	for _, p := range fake.Posts() {
		got[p.Text]++
	}
	for _, w := range want {
		if got[w] != 1 {
			t.Errorf("reply %q posted %d times, want once", w, got[w])
		}
	}
}
