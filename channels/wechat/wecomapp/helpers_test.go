package wecomapp

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
	testCorp    = "ww-test-corp"
	testAgent   = 1000002
	testSecret  = "wecom-app-secret-for-tests"
	testToken   = "wecomAppToken"
	testAESKey  = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"
	testAppName = "ops"
)

// gateway stands in for the gateway of one replica: it de-duplicates on
// Message.ID with SET NX in the shared Redis, as the gateway does, records
// what it accepted, and answers "echo: <text>" through its replica's
// adapter after Submit has returned.
type gateway struct {
	r  *redistest.Redis
	ch *Adapter

	mu    sync.Mutex
	got   []channels.Message
	turns sync.WaitGroup
	errs  []error
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
	g.mu.Unlock()
	g.turns.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		reply := channels.Reply{Text: "echo: " + m.Text}
		if m.Unsupported != "" { // as the gateway answers a sender it admits
			reply = channels.Reply{Text: m.Unsupported, Notice: true}
		}
		if err := g.ch.Send(ctx, m, reply); err != nil {
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

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testApp is the app the fake serves.
func testApp(fake *wechattest.WeComApp) App {
	return App{Name: testAppName, CorpID: fake.CorpID, AgentID: int64(fake.AgentID), Secret: config.Secret(fake.Secret),
		Token: testToken, EncodingAESKey: testAESKey, BaseURL: fake.URL()}
}

// testOptions are short timings for tests.
func testOptions(r *redistest.Redis, replica string) Options {
	return Options{
		Redis: r.Client, Prefix: r.Prefix,
		API: wxapi.ClientOptions{HTTP: wechattest.ReplicaClient(replica), RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond},
	}
}

// replica is one running adapter behind its own HTTP server.
type replica struct {
	ch  *Adapter
	gw  *gateway
	m   *metrics.Metrics
	srv *httptest.Server
}

// url is the callback URL of the test app on this replica.
func (rp *replica) url() string { return rp.srv.URL + PathPrefix + testAppName }

// startReplica builds an adapter for cfg, runs it with its own gateway
// until the test ends, and serves its routes.
func startReplica(t *testing.T, r *redistest.Redis, cfg Config, opts Options) *replica {
	t.Helper()
	m := metrics.New()
	ch, err := New(cfg, opts, m, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	gw := &gateway{r: r, ch: ch}
	ch.handler = gw
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
	return &replica{ch: ch, gw: gw, m: m, srv: srv}
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
