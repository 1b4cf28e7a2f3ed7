package wechat

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeGateway stands in for the gateway: it de-duplicates on Message.ID
// with SET NX in Redis, as the gateway does, records what it accepted and
// answers "echo: <text>" through the channel (a message with nothing to
// read: its note).
type fakeGateway struct {
	r  *redistest.Redis
	ch *Adapter
	// hold, when set, makes Submit of a message it matches wait until
	// ctx ends without accepting it (a replica dying mid-batch).
	hold func(m channels.Message) bool

	mu  sync.Mutex
	got []channels.Message
}

func (g *fakeGateway) Submit(ctx context.Context, m channels.Message) error {
	if g.hold != nil && g.hold(m) {
		<-ctx.Done()
		return ctx.Err()
	}
	first, err := g.r.Client.SetNX(ctx, g.r.Prefix+"dedupe:"+m.Channel+":"+m.ID, 1, time.Hour).Result()
	if err != nil {
		return err
	}
	if !first {
		return nil
	}
	g.mu.Lock()
	g.got = append(g.got, m)
	g.mu.Unlock()
	stop := g.ch.StartTyping(ctx, m)
	defer stop()
	if m.Unsupported != "" {
		// As the gateway answers a sender its access rules admit.
		return g.ch.Send(ctx, m, channels.Reply{Text: m.Unsupported, Notice: true})
	}
	return g.ch.Send(ctx, m, channels.Reply{Text: "echo: " + m.Text})
}

func (g *fakeGateway) messages() []channels.Message {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]channels.Message(nil), g.got...)
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// setup is everything New takes, with short timings for tests. Config
// and Options are embedded, so a test sets cfg.State or cfg.WeComBotID
// alike.
type setup struct {
	Config
	Options
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

func (s setup) new() (*Adapter, error) { return New(s.Config, s.Options, s.Metrics, s.Log) }

// testConfig is an adapter setup with short timings for tests.
func testConfig(r *redistest.Redis, replica string) setup {
	return setup{
		Options: Options{
			Client: r.Client, Prefix: r.Prefix,
			HTTP:     wechattest.ReplicaClient(replica),
			LeaseTTL: 900 * time.Millisecond, AccountRefresh: 100 * time.Millisecond,
			RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
			PingInterval: 100 * time.Millisecond, AckTimeout: 2 * time.Second,
			TypingInterval: 50 * time.Millisecond,
		},
		Metrics: metrics.New(), Log: quietLog(),
	}
}

// running is a started channel.
type running struct {
	ch     *Adapter
	gw     *fakeGateway
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func start(t *testing.T, r *redistest.Redis, cfg setup, hold func(channels.Message) bool) *running {
	t.Helper()
	ch, err := cfg.new()
	if err != nil {
		t.Fatal(err)
	}
	gw := &fakeGateway{r: r, ch: ch, hold: hold}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ch.Run(ctx, gw) }()
	rn := &running{ch: ch, gw: gw, cancel: cancel, done: done}
	t.Cleanup(rn.stop)
	return rn
}

func (rn *running) stop() {
	rn.once.Do(func() {
		rn.cancel()
		select {
		case <-rn.done:
		case <-time.After(20 * time.Second):
			panic("wechat channel did not stop")
		}
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !wechattest.WaitFor(20*time.Second, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func counter(t *testing.T, m *metrics.Metrics, name string, labels ...string) float64 {
	t.Helper()
	switch name {
	case "rejected":
		return testutil.ToFloat64(m.MessagesRejected.WithLabelValues(labels...))
	case "api":
		return testutil.ToFloat64(m.ChannelAPIErrors.WithLabelValues(labels...))
	case "reconnects":
		return testutil.ToFloat64(m.Reconnects.WithLabelValues(labels...))
	case "connected":
		return testutil.ToFloat64(m.ChannelConnected.WithLabelValues(labels...))
	}
	t.Fatalf("unknown metric %s", name)
	return 0
}

// loggedIn stores the fake's account as a login would.
func loggedIn(t *testing.T, st State, f *wechattest.ILink) {
	t.Helper()
	if err := st.SaveAccount(context.Background(), Account{BotID: f.BotID, Token: f.Token(), BaseURL: f.URL(), LoggedIn: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

func sendsTo(f *wechattest.ILink, user string) []wechattest.Sent {
	var out []wechattest.Sent
	for _, s := range f.Sends() {
		if s.To == user {
			out = append(out, s)
		}
	}
	return out
}

func texts(sends []wechattest.Sent) string {
	var out []string
	for _, s := range sends {
		out = append(out, s.Text)
	}
	return strings.Join(out, " | ")
}
