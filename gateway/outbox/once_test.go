package outbox_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

// TestOutboxPostsOncePartSlackWroteWithoutAnswering: Slack posts part 2
// and answers 502; the thread cannot be read back while the first replica
// tries, so the reply is queued; the other replica, resuming the item,
// finds part 2 in the thread by its delivery id and does not post it
// again.
func TestOutboxPostsOncePartSlackWroteWithoutAnswering(t *testing.T) {
	t.Parallel()
	r, fake := redistest.New(t), slacktest.New(t)
	a, b := newReplica(t, r, fake, fastConfig()), newReplica(t, r, fake, fastConfig())
	reply, parts := longReply(2)
	fake.Fail("chat.postMessage", slacktest.Failure{Pass: true}, slacktest.Failure{Written: true, Status: http.StatusBadGateway})
	var unreadable []slacktest.Failure
	for range 1000 {
		unreadable = append(unreadable, slacktest.Failure{Status: http.StatusServiceUnavailable})
	}
	fake.Fail("conversations.replies", unreadable...)
	if err := a.o.Deliver(context.Background(), a.slack, thread(), reply); err != nil {
		t.Fatalf("Deliver = %v; want the reply queued", err)
	}
	if a.deliveries(metrics.DeliveryRetried) != 1 {
		t.Fatalf("retried=%v; want the reply queued once the thread could not be read", a.deliveries(metrics.DeliveryRetried))
	}
	if n := fake.Count("chat.postMessage"); n != 2 {
		t.Fatalf("%d chat.postMessage calls; want 2: no post again while the thread cannot be read", n)
	}
	fake.Heal("conversations.replies")
	b.start(t)
	slacktest.WaitFor(t, "the other replica to deliver the reply", 30*time.Second, func() bool {
		return b.deliveries(metrics.DeliverySent) == 1
	})
	samePosts(t, fake, parts)
}
