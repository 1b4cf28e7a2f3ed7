package slack

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack/slacktest"
)

const deadline = 20 * time.Second

// startRun runs the adapter until the returned stop is called; stop checks
// that Run returned and left no goroutine behind.
func startRun(t *testing.T, f *fixture) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.a.Run(ctx, f.h) }()
	var once sync.Once
	return func() {
		t.Helper()
		once.Do(func() { stopRun(t, cancel, done) })
	}
}

func stopRun(t *testing.T, cancel func(), done chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(deadline):
		t.Fatalf("Run did not return after its context was cancelled; goroutines:\n%s", leftovers())
	}
	slacktest.WaitFor(t, "the adapter's goroutines to end", deadline, func() bool { return leftovers() == "" })
}

// leftovers returns the stacks of goroutines still running adapter or
// slack-go code.
func leftovers() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/slack-go/slack") || strings.Contains(g, "parley/channels/slack.(*Adapter)") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

func TestSocketModeEndToEnd(t *testing.T) {
	// Not parallel: it waits for every goroutine of the adapter and slack-go to
	// end, the other tests' too.
	f := newFixture(t, func(c *Config, o *Options) {
		c.AppToken = slacktest.AppToken
		c.SigningSecret = ""
		o.Handler = nil
	})
	// The "gateway" answers every message through the adapter.
	f.h.reply = func(m channels.Message) {
		stop := f.a.StartTyping(context.Background(), m)
		defer stop()
		if err := f.a.Send(context.Background(), m, channels.Reply{Text: "echo: **" + m.Text + "**"}); err != nil {
			t.Errorf("send: %v", err)
		}
	}
	if f.a.Ready() == nil {
		t.Fatal("ready before connecting")
	}
	stop := startRun(t, f)
	defer stop()
	connected := func(n int) func() bool {
		return func() bool { return f.slack.Connections() == n && f.a.Ready() == nil }
	}
	slacktest.WaitFor(t, "socket mode to connect", deadline, connected(1))
	if f.slack.Count("auth.test") == 0 {
		slacktest.WaitFor(t, "auth.test", deadline, func() bool { return f.slack.Count("auth.test") > 0 })
	}
	if g := testutil.ToFloat64(f.m.ChannelConnected.WithLabelValues(Name)); g != 1 {
		t.Fatalf("connected gauge %v", g)
	}

	answered := func(thread, text string) func() bool {
		return func() bool {
			for _, p := range f.slack.Posts() {
				if p.ThreadTS == thread && p.Text == text {
					return true
				}
			}
			return false
		}
	}
	mustSend := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	mustSend(f.slack.SendEvent("env-1", slacktest.Event("Ev1", slacktest.Mention("C1", "U1", "50.1", "", "hello socket"))))
	slacktest.WaitFor(t, "env-1 to be acked", deadline, func() bool { return f.slack.Acked("env-1") })
	slacktest.WaitFor(t, "the answer in thread 50.1", deadline, answered("50.1", "echo: *hello socket*"))
	slacktest.WaitFor(t, "the :eyes: reaction to be removed", deadline, func() bool { return f.slack.Count("reactions.remove") == 1 })
	if r := f.slack.Reactions(); r[0].Method != "reactions.add" || r[0].Timestamp != "50.1" {
		t.Fatalf("reactions %+v", r)
	}

	// Ignored and unknown events are acked too, or Slack resends them.
	bot := slacktest.Message("D1", "im", "", "51.1", "", "beep")
	bot["bot_id"], bot["subtype"] = "B2", "bot_message"
	mustSend(f.slack.SendEvent("env-2", slacktest.Event("Ev2", bot)))
	mustSend(f.slack.SendEvent("env-3", slacktest.Event("Ev3", map[string]any{"type": "made_up_event", "x": 1})))
	slacktest.WaitFor(t, "ignored events to be acked", deadline, func() bool { return f.slack.Acked("env-2") && f.slack.Acked("env-3") })

	// A slash command over the socket.
	mustSend(f.slack.SendCommand("env-4", map[string]string{"team_id": slacktest.TeamID, "channel_id": "C1", "user_id": "U1",
		"command": "/parley", "text": "/skill list", "trigger_id": "tr-sock", "response_url": f.slack.ResponseURL("tr-sock")}))
	slacktest.WaitFor(t, "the command to be acked", deadline, func() bool { return f.slack.Acked("env-4") })
	slacktest.WaitFor(t, "the command's answer", deadline, func() bool {
		for _, p := range f.slack.Posts() {
			if p.ResponseURL == "/response/tr-sock" && p.Text == "echo: */skill list*" {
				return true
			}
		}
		return false
	})

	// Slack asks us to reconnect: a new connection is opened and used.
	mustSend(f.slack.Disconnect())
	slacktest.WaitFor(t, "a second connection", deadline, connected(2))
	slacktest.WaitFor(t, "the reconnect to be counted", deadline, func() bool {
		return testutil.ToFloat64(f.m.Reconnects.WithLabelValues(Name)) == 1
	})
	mustSend(f.slack.SendEvent("env-5", slacktest.Event("Ev5", slacktest.Mention("C1", "U1", "52.2", "52.1", "after reconnect"))))
	slacktest.WaitFor(t, "env-5 to be acked", deadline, func() bool { return f.slack.Acked("env-5") })
	slacktest.WaitFor(t, "the answer after the reconnect", deadline, answered("52.1", "echo: *after reconnect*"))

	// The same event delivered again (Slack's retry) is taken once.
	mustSend(f.slack.SendEvent("env-6", slacktest.Event("Ev5", slacktest.Mention("C1", "U1", "52.2", "52.1", "after reconnect"))))
	slacktest.WaitFor(t, "env-6 to be acked", deadline, func() bool { return f.slack.Acked("env-6") })
	if n := len(f.h.messages()); n != 3 {
		t.Fatalf("%d messages taken, want 3 (two mentions and the command)", n)
	}

	stop()
	if g := testutil.ToFloat64(f.m.ChannelConnected.WithLabelValues(Name)); g != 0 {
		t.Fatalf("connected gauge %v after stop", g)
	}
}

func TestSocketModeKeepsTryingAndStopsOnCancel(t *testing.T) {
	// Not parallel: it waits for every goroutine of the adapter and slack-go to
	// end, the other tests' too.
	f := newFixture(t, func(c *Config, o *Options) {
		c.AppToken = "xapp-refused"
		c.SigningSecret = ""
	})
	stop := startRun(t, f)
	slacktest.WaitFor(t, "a few refused connection attempts", deadline, func() bool { return f.slack.Count("apps.connections.open") >= 3 })
	if err := f.a.Ready(); err == nil || !strings.Contains(err.Error(), "invalid_auth") {
		t.Fatalf("Ready = %v; want the refusal", err)
	}
	if strings.Contains(f.a.Ready().Error(), "xapp-") {
		t.Fatal("the token is in the readiness error")
	}
	stop()
}

func TestHTTPOnlyRunIdentifiesAndWaits(t *testing.T) {
	// Not parallel: it waits for every goroutine of the adapter and slack-go to
	// end, the other tests' too.
	f := newFixture(t, nil)
	f.slack.Fail("auth.test", slacktest.Failure{Status: 500})
	stop := startRun(t, f)
	slacktest.WaitFor(t, "auth.test to succeed on a retry", deadline, func() bool { return f.a.BotUserID() == slacktest.BotUserID })
	if f.a.Ready() != nil {
		t.Fatal("HTTP mode is not ready")
	}
	stop()
}
