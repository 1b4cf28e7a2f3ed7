package feishu

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
)

// ourGoroutines lists goroutines running this package's methods.
func ourGoroutines() []string {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	var out []string
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "parley/channels/feishu.(*") {
			out = append(out, g)
		}
	}
	return out
}

func startRun(t *testing.T, f *fixture, h channels.Handler) (cancel func() error) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.ch.Run(ctx, h) }()
	var once sync.Once
	var err error
	wait := func() error {
		once.Do(func() {
			stop()
			select {
			case err = <-done:
			case <-time.After(15 * time.Second):
				err = errors.New("Run did not return after its context ended")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = wait() })
	return wait
}

func TestLongConnectionUsesTheSameDispatcher(t *testing.T) {
	// Not parallel: it looks for goroutines the adapter left behind and would see
	// the other tests'.
	f := newFixture(t, func(c *Config, o *Options) { c.Mode = "websocket"; o.Handler = nil })
	if err := f.ch.Ready(); err == nil {
		t.Fatal("ready before Run")
	}
	stop := startRun(t, f, f.rec)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := f.api.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "readiness", func() bool { return f.ch.Ready() == nil })
	if v := testutil.ToFloat64(f.m.ChannelConnected.WithLabelValues(Name)); v != 1 {
		t.Errorf("connected gauge = %v", v)
	}
	waitUntil(t, "a ping frame", func() bool { return f.api.Pings() > 0 })

	mention := feishutest.Event(feishutest.Message{Token: testToken, MessageID: "om_ws1", ChatID: "oc_g", ChatType: "group", Sender: "ou_a",
		Content: feishutest.Text("@_user_1 over the socket"), Mentions: []feishutest.Mention{mentionBot()}})
	if code, err := f.api.Push(ctx, mention, 1); err != nil || code != 200 {
		t.Fatalf("push: %d %v", code, err)
	}
	// A payload split into parts, as Feishu does for large events.
	split := feishutest.Event(feishutest.Message{MessageID: "om_ws2", ChatID: "oc_dm", ChatType: "p2p", Sender: "ou_a", Content: feishutest.Text("in three parts")})
	if code, err := f.api.Push(ctx, split, 3); err != nil || code != 200 {
		t.Fatalf("split push: %d %v", code, err)
	}
	quiet := feishutest.Event(feishutest.Message{MessageID: "om_ws3", ChatID: "oc_g", ChatType: "group", Sender: "ou_b", Content: feishutest.Text("no mention")})
	if code, err := f.api.Push(ctx, quiet, 1); err != nil || code != 200 {
		t.Fatalf("quiet push: %d %v", code, err)
	}
	// The same message again, now over HTTP: de-duplicated on message_id.
	if status, _ := f.post(t, mention); status != 200 {
		t.Fatalf("HTTP re-push: %d", status)
	}
	msgs := f.rec.messages()
	if len(msgs) != 2 || msgs[0].Text != "over the socket" || msgs[1].Text != "in three parts" || f.rec.dups != 1 {
		t.Fatalf("submitted %+v (dups %d)", msgs, f.rec.dups)
	}

	// The server drops the connection: readiness and the gauge follow, and
	// the client reconnects.
	f.api.DropConnections()
	waitUntil(t, "a reconnect", func() bool {
		return testutil.ToFloat64(f.m.Reconnects.WithLabelValues(Name)) >= 1 && f.api.Connections() == 1 && f.ch.Ready() == nil
	})
	if f.api.EndpointRequests() < 2 {
		t.Errorf("reconnected without asking the endpoint again (%d requests)", f.api.EndpointRequests())
	}
	if code, err := f.api.Push(ctx, feishutest.Event(feishutest.Message{MessageID: "om_ws4", ChatID: "oc_dm", ChatType: "p2p", Sender: "ou_a", Content: feishutest.Text("after")}), 1); err != nil || code != 200 {
		t.Fatalf("push after reconnect: %d %v", code, err)
	}

	if err := stop(); err != nil {
		t.Fatalf("Run returned %v; want nil once its context ended", err)
	}
	if err := f.ch.Ready(); err == nil {
		t.Error("ready after Run returned")
	}
	if v := testutil.ToFloat64(f.m.ChannelConnected.WithLabelValues(Name)); v != 0 {
		t.Errorf("connected gauge after stop = %v", v)
	}
	if gs := ourGoroutines(); len(gs) > 0 {
		t.Fatalf("goroutines outlive Run:\n%s", strings.Join(gs, "\n\n"))
	}
	waitUntil(t, "the server to see the close", func() bool { return f.api.Connections() == 0 })
}

type failingHandler struct{}

func (failingHandler) Submit(context.Context, channels.Message) error {
	return errors.New("redis down")
}

func TestLongConnectionAnswers500WhenNotQueued(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config, o *Options) { c.Mode = ""; o.Handler = nil })
	stop := startRun(t, f, failingHandler{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := f.api.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	code, err := f.api.Push(ctx, feishutest.Event(feishutest.Message{MessageID: "om_x", ChatID: "oc_dm", ChatType: "p2p", Sender: "ou_a", Content: feishutest.Text("x")}), 1)
	if err != nil || code != 500 {
		t.Fatalf("push: %d %v; want 500 so Feishu pushes it again", code, err)
	}
	stop()
}

func TestLongConnectionRefusedIsNotReady(t *testing.T) {
	// Not parallel: it looks for goroutines the adapter left behind and would see
	// the other tests'.
	f := newFixture(t, func(c *Config, o *Options) { c.Mode = "" })
	f.api.Fail("endpoint", feishutest.Failure{Code: 1000040351, Msg: "app not found"}, feishutest.Failure{Code: 1000040351, Msg: "app not found"})
	stop := startRun(t, f, f.rec)
	waitUntil(t, "two endpoint attempts", func() bool { return f.api.EndpointRequests() >= 2 })
	if err := f.ch.Ready(); err == nil {
		t.Fatal("ready although the endpoint refused")
	}
	if v := testutil.ToFloat64(f.m.ChannelAPIErrors.WithLabelValues(Name, "1000040351")); v < 1 {
		t.Errorf("endpoint refusal not counted")
	}
	// It keeps trying and gets in once the endpoint answers.
	waitUntil(t, "the connection", func() bool { return f.ch.Ready() == nil })
	stop()
	if gs := ourGoroutines(); len(gs) > 0 {
		t.Fatalf("goroutines outlive Run:\n%s", strings.Join(gs, "\n\n"))
	}
}

func TestWebhookModeOpensNoConnection(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil) // Mode webhook
	stop := startRun(t, f, f.rec)
	waitUntil(t, "the bot identity", func() bool { return f.ch.cachedBotID() == feishutest.BotOpenID })
	if err := f.ch.Ready(); err != nil {
		t.Fatalf("webhook mode not ready: %v", err)
	}
	stop()
	if f.api.EndpointRequests() != 0 {
		t.Fatal("webhook mode asked for a long-connection endpoint")
	}
}

// TestAWebhookAppThatCannotLearnItsBotIsNotReady: an app served by
// webhooks whose bot identity is refused (a revoked secret) cannot tell
// its mentions in a group, so its readiness names it down, revealing no
// secret, until Feishu answers again.
func TestAWebhookAppThatCannotLearnItsBotIsNotReady(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil) // webhook mode
	var fails []feishutest.Failure
	for range 1000 {
		fails = append(fails, feishutest.Failure{Status: 400, Code: 99991663})
	}
	f.api.Fail("bot_info", fails...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.ch.Run(ctx, f.rec) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitUntil(t, "the refusal in readiness", func() bool { return f.ch.Ready() != nil })
	if msg := f.ch.Ready().Error(); strings.Contains(msg, "secret") || strings.Contains(msg, f.ch.cfg.AppSecret.Reveal()) {
		t.Errorf("readiness %q shows the credential", msg)
	}
	f.api.Heal("bot_info")
	waitUntil(t, "readiness once the bot is known", func() bool { return f.ch.Ready() == nil })
}

// TestAWebhookAppWhoseBotInfoFailsForAWhileStaysReady: Feishu's API
// failing in a way that may pass (5xx) is not a refusal of the app: its
// webhooks still arrive, so readiness does not drop while it retries.
func TestAWebhookAppWhoseBotInfoFailsForAWhileStaysReady(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil) // webhook mode
	f.api.Fail("bot_info", feishutest.Failure{Status: 503, Code: 1000004}, feishutest.Failure{Status: 503, Code: 1000004})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.ch.Run(ctx, f.rec) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	for deadline := time.Now().Add(15 * time.Second); f.api.BotInfoRequests() < 3 && time.Now().Before(deadline); {
		if err := f.ch.Ready(); err != nil {
			t.Fatalf("readiness while bot_info fails with 503: %v; want ready", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitUntil(t, "the bot known", func() bool { return f.ch.cachedBotID() != "" })
	if err := f.ch.Ready(); err != nil {
		t.Errorf("readiness once the bot is known: %v", err)
	}
}
