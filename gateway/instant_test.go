package gateway_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/channels/slack"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// instant is a gateway whose typing delay no test's answer outlasts: the
// live reply shows nothing before the answer is complete.
var instant = gateway.Config{TypingDelay: time.Minute}

// TestAnInstantAnswerIsOnePostOnSlack: an answer complete before the
// typing delay is one chat.postMessage in the thread — no status line,
// no stream started and stopped, no typing reaction.
func TestAnInstantAnswerIsOnePostOnSlack(t *testing.T) {
	t.Parallel()
	r, model, fake := redistest.New(t), openaitest.New(t), slacktest.New(t)
	rp := newSlackReplicaConfig(t, r, model, fake, false, true, instant)
	const thread = "1700000000.000100"
	m := channels.Message{ID: "Ev1", Channel: slack.Name, Workspace: slacktest.TeamID, Chat: "C1", Thread: thread,
		User: "U1", Text: "hello", Meta: map[string]string{slack.MetaTS: thread, slack.MetaThreadTS: thread}}
	if err := rp.gw.Submit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	slacktest.WaitFor(t, "the answer", 30*time.Second, func() bool { return rp.delivered(metrics.DeliverySent) == 1 })
	calls := slices.DeleteFunc(fake.Calls(), func(c string) bool { return c == "auth.test" })
	if !slices.Equal(calls, []string{"chat.postMessage"}) {
		t.Fatalf("Slack calls for an instant answer: %v; want one chat.postMessage", calls)
	}
	if got := platformCalls(t, rp.metrics, slack.Name); len(got) != 1 || got["chat.postMessage"] != 1 {
		t.Fatalf("parley_platform_calls_total = %v; want the one post", got)
	}
	if vis := fake.Visible(); len(vis) != 1 || vis[0].Text != "echo: hello" || vis[0].ThreadTS != thread || vis[0].Streamed {
		t.Fatalf("thread shows %+v; want the answer once, posted", vis)
	}
}

// TestAnInstantAnswerIsOnePostOnFeishu: the same on Feishu: one message
// in the thread, no card made and updated.
func TestAnInstantAnswerIsOnePostOnFeishu(t *testing.T) {
	t.Parallel()
	r, model, fake := redistest.New(t), openaitest.New(t), feishutest.New(t)
	rp := newFeishuReplicaConfig(t, r, model, fake, instant)
	if err := rp.gw.Submit(context.Background(), feishuQuestion("hello")); err != nil {
		t.Fatal(err)
	}
	slacktest.WaitFor(t, "the answer", 30*time.Second, func() bool { return len(fake.Sent()) == 1 })
	if calls := fake.Calls(); len(calls) != 0 {
		t.Fatalf("card calls for an instant answer: %+v; want none", calls)
	}
	if vis := fake.Visible(); len(vis) != 1 || vis[0].Text != "echo: hello" || vis[0].CardID != "" {
		t.Fatalf("visible %+v; want the answer once, posted", vis)
	}
	got := platformCalls(t, rp.metrics, feishu.Name)
	var sent float64
	for method, n := range got {
		if strings.HasPrefix(method, "cardkit/") {
			t.Errorf("parley_platform_calls_total counts %v of %s; want no card", n, method)
		}
		if strings.HasPrefix(method, "im/v1/messages") {
			sent += n
		}
	}
	if sent != 1 {
		t.Fatalf("parley_platform_calls_total = %v; want one message sent", got)
	}
}

// platformCalls is parley_platform_calls_total of channel by method.
func platformCalls(t *testing.T, m *metrics.Metrics, channel string) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { m.PlatformCalls.Collect(ch); close(ch) }()
	got := map[string]float64{}
	for pm := range ch {
		var d dto.Metric
		if err := pm.Write(&d); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["channel"] == channel {
			got[labels["method"]] += d.GetCounter().GetValue()
		}
	}
	return got
}
