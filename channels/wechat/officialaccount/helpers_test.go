package officialaccount

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/channels/wechat/wxapi"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

const (
	testAppID    = "wx-test-account"
	testSecret   = "oa-app-secret-for-tests"
	testToken    = "oaCallbackToken"
	testAESKey   = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"
	testOriginal = "gh_0123456789ab" // the account's original id, ToUserName
)

// gateway stands in for the gateway of a cluster: it de-duplicates on
// Message.ID with SET NX in the shared Redis, as the gateway does, and
// runs each accepted turn on the replica turnOn names — not necessarily
// the one whose callback submitted it — after Submit has returned, with
// the typing indicator around it like the gateway's. A turn waits for
// release when that is set.
type gateway struct {
	r       *redistest.Redis
	turnOn  func() *Adapter
	release chan struct{} // nil: answer at once
	answer  func(text string) string
	// quiet, when set, picks the messages refused without a reply (as the
	// gateway refuses a rate-limited sender already told): their channel
	// is told they are left unanswered, and nothing is sent.
	quiet func(text string) bool

	mu    sync.Mutex
	got   []channels.Message
	errs  []error
	turns sync.WaitGroup
}

func newGateway(r *redistest.Redis) *gateway {
	return &gateway{r: r, answer: func(text string) string { return "echo: " + text }}
}

func (g *gateway) Submit(ctx context.Context, m channels.Message) error {
	first, err := g.r.Client.SetNX(ctx, g.r.Prefix+"dedupe:"+m.Channel+":"+m.ID, 1, time.Hour).Result()
	if err != nil {
		return err
	}
	if !first {
		return nil
	}
	g.mu.Lock()
	g.got = append(g.got, m)
	ch, release := g.turnOn(), g.release
	g.mu.Unlock()
	g.turns.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stop := ch.StartTyping(ctx, m)
		defer stop()
		if release != nil {
			<-release
		}
		if g.quiet != nil && g.quiet(m.Text) {
			ch.LeftUnanswered(ctx, m)
			return
		}
		reply := channels.Reply{Text: g.answer(m.Text)}
		if m.Unsupported != "" { // as the gateway answers a sender it admits
			reply = channels.Reply{Text: m.Unsupported, Notice: true}
		}
		if err := ch.Send(ctx, m, reply); err != nil {
			g.mu.Lock()
			g.errs = append(g.errs, err)
			g.mu.Unlock()
		}
	})
	return nil
}

func (g *gateway) messages() []channels.Message {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]channels.Message(nil), g.got...)
}

func (g *gateway) sendErrors() []error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]error(nil), g.errs...)
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testConfig is the account the fake serves, in safe mode (empty key:
// plaintext mode).
func testConfig(fake *wechattest.OfficialAccount, key string) Config {
	return Config{AppID: fake.AppID, AppSecret: config.Secret(fake.Secret), Token: testToken, EncodingAESKey: config.Secret(key), BaseURL: fake.URL()}
}

// testOptions are short timings for tests. PassiveWait is long: a test of
// the active path sets its own.
func testOptions(r *redistest.Redis, replica string) Options {
	return Options{
		Redis: r.Client, Prefix: r.Prefix,
		API:         wxapi.ClientOptions{HTTP: wechattest.ReplicaClient(replica), RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond},
		PassiveWait: 10 * time.Second,
	}
}

// replica is one running adapter behind its own HTTP server.
type replica struct {
	ch  *Adapter
	m   *metrics.Metrics
	srv *httptest.Server
}

func (rp *replica) url() string { return rp.srv.URL + Path }

// startReplica runs an adapter with gw until the test ends and serves its
// routes.
func startReplica(t testing.TB, cfg Config, opts Options, gw *gateway) *replica {
	t.Helper()
	m := metrics.New()
	opts.Handler = gw
	ch, err := New(cfg, opts, m, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	ch.Mount(mux)
	srv := httptest.NewServer(mux)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ch.Run(ctx, gw) }()
	t.Cleanup(func() {
		srv.Close()
		gw.turns.Wait()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Run did not return")
		}
	})
	return &replica{ch: ch, m: m, srv: srv}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !wechattest.WaitFor(20*time.Second, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func rejected(m *metrics.Metrics, reason string) float64 {
	return testutil.ToFloat64(m.MessagesRejected.WithLabelValues(Name, reason))
}

// cluster is one account — its fake API, the platform's side of its
// callbacks — and the gateway its replicas share.
type cluster struct {
	r        *redistest.Redis
	fake     *wechattest.OfficialAccount
	gw       *gateway
	platform *wechattest.Platform
	key      string // EncodingAESKey; empty: plaintext mode
}

func newCluster(t testing.TB, key string) *cluster {
	t.Helper()
	r := redistest.New(t)
	return &cluster{r: r, fake: wechattest.NewOfficialAccount(t, testAppID, testSecret), gw: newGateway(r),
		platform: wechattest.NewPlatform(t, testToken, key, testAppID), key: key}
}

// replica starts a replica named name (edit, when set, changes its
// options). Turns run on the first replica unless gw.turnOn says
// otherwise.
func (c *cluster) replica(t testing.TB, name string, edit func(*Options)) *replica {
	t.Helper()
	opts := testOptions(c.r, name)
	if edit != nil {
		edit(&opts)
	}
	rp := startReplica(t, testConfig(c.fake, c.key), opts, c.gw)
	c.gw.mu.Lock()
	if c.gw.turnOn == nil {
		c.gw.turnOn = func() *Adapter { return rp.ch }
	}
	c.gw.mu.Unlock()
	return rp
}

// inbound is a text message from user to the account.
func inbound(user, text, msgID string) wechattest.Inbound {
	return wechattest.Inbound{To: testOriginal, From: user, Content: text, MsgID: msgID}
}
