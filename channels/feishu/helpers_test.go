package feishu

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/metrics"
)

const (
	testToken = "vtoken"
	testKey   = "enc-key"
)

// recorder stands in for the gateway: it records submitted messages and,
// like the gateway, drops a second Submit of the same Message.ID.
type recorder struct {
	mu   sync.Mutex
	msgs []channels.Message
	seen map[string]bool
	dups int
}

func (r *recorder) Submit(_ context.Context, m channels.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	if m.ID != "" && r.seen[m.ID] {
		r.dups++
		return nil
	}
	r.seen[m.ID] = true
	r.msgs = append(r.msgs, m)
	return nil
}

func (r *recorder) messages() []channels.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]channels.Message(nil), r.msgs...)
}

type fixture struct {
	api *feishutest.Server
	ch  *Adapter
	rec *recorder
	m   *metrics.Metrics
	srv *httptest.Server
	now time.Time
}

// newFixture builds an adapter against a fake Open API. mod adjusts the
// config and options (token, key, mode…) before New.
func newFixture(t testing.TB, mod func(*Config, *Options)) *fixture {
	t.Helper()
	f := &fixture{api: feishutest.New(t), rec: &recorder{}, m: metrics.New(), now: time.Unix(1_700_000_000, 0)}
	cfg := Config{
		AppID: "cli_" + strings.NewReplacer("/", "_").Replace(t.Name()), AppSecret: "secret",
		VerificationToken: testToken, EncryptKey: testKey,
		BaseURL: f.api.URL, Mode: "webhook", ReplyInThread: true, FollowThreads: true,
	}
	o := Options{
		Handler:      f.rec,
		Now:          func() time.Time { return f.now },
		RetryBase:    10 * time.Millisecond,
		ChatInterval: time.Millisecond,
		ReconnectMin: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg, &o)
	}
	ch, err := New(cfg, o, f.m, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	f.ch = ch
	mux := http.NewServeMux()
	ch.Mount(mux)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// post sends a callback body, encrypted and signed when the channel has an
// Encrypt Key, and returns status and body.
func (f *fixture) post(t *testing.T, event []byte) (int, string) {
	t.Helper()
	body := event
	key := f.ch.cfg.EncryptKey.Reveal()
	if key != "" {
		body = feishutest.Encrypted(event, key)
	}
	return f.do(t, feishutest.Request(f.srv.URL+EventsPath, body, key, f.now))
}

func (f *fixture) do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitUntil polls cond with a generous deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func mentionBot() feishutest.Mention {
	return feishutest.Mention{Key: "@_user_1", OpenID: feishutest.BotOpenID, Name: "Parley"}
}
