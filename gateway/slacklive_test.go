package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

// TestSlackStreamThatCannotFinishGoesToTheOutbox: the answer streams, but
// Slack fails to stop the stream and then to take posts; the partial
// stream is deleted and the answer waits in the outbox until Slack
// recovers, then is posted once — the only message left in the thread.
func TestSlackStreamThatCannotFinishGoesToTheOutbox(t *testing.T) {
	t.Parallel()
	r, model, fake := redistest.New(t), openaitest.New(t), slacktest.New(t)
	rp := newSlackReplicaWith(t, r, model, fake, false, true)
	var fails []slacktest.Failure
	for range 1000 {
		fails = append(fails, slacktest.Failure{Status: 503})
	}
	fake.Fail("chat.stopStream", fails...)
	fake.Fail("chat.postMessage", fails...)
	const thread = "1700000000.000100"
	m := channels.Message{ID: "Ev1", Channel: slack.Name, Workspace: slacktest.TeamID, Chat: "C1", Thread: thread,
		User: "U1", Text: "hello there, how are you", Meta: map[string]string{slack.MetaThreadTS: thread}}
	if err := rp.gw.Submit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	slacktest.WaitFor(t, "a try from the outbox", 30*time.Second, func() bool {
		return rp.delivered(metrics.DeliveryRetried) >= 1
	})
	if fake.Count("chat.startStream") != 1 {
		t.Fatalf("calls %v; want the answer streamed first", fake.Calls())
	}
	if vis := fake.Visible(); len(vis) != 0 {
		t.Fatalf("while Slack fails, the thread shows %+v; want the partial stream removed", vis)
	}
	fake.Heal("chat.postMessage")
	slacktest.WaitFor(t, "the answer delivered", 30*time.Second, func() bool {
		return rp.delivered(metrics.DeliverySent) == 1
	})
	vis := fake.Visible()
	if len(vis) != 1 || vis[0].Text != "echo: hello there, how are you" || vis[0].ThreadTS != thread || vis[0].Streamed {
		t.Fatalf("thread shows %+v; want the answer once, posted", vis)
	}
	if n := testutil.ToFloat64(rp.metrics.ReplyStreamFallbacks.WithLabelValues(slack.Name, "stream", "post")); n != 1 {
		t.Errorf("stream→post counted %v times, want 1", n)
	}
}
