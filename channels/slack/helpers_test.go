package slack

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
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/metrics"
)

// recorder is a gateway stand-in: it de-duplicates on Message.ID and keeps
// conversation marks like the real one, records what it accepts and can
// answer through a channel.
type recorder struct {
	mu    sync.Mutex
	msgs  []channels.Message
	seen  map[string]bool
	marks map[string]bool // conversation key + "|" + mark
	err   error
	// reply, when set, is called for every accepted message in its own
	// goroutine (as the gateway's workers do).
	reply func(channels.Message)
	wg    sync.WaitGroup
}

func (r *recorder) Submit(_ context.Context, m channels.Message) error {
	r.mu.Lock()
	if r.err != nil {
		r.mu.Unlock()
		return r.err
	}
	if r.seen == nil {
		r.seen, r.marks = map[string]bool{}, map[string]bool{}
	}
	conv := m.ConversationKey()
	if m.RequireMark != "" && !r.marks[conv+"|"+m.RequireMark] {
		r.mu.Unlock()
		return channels.ErrUnmarked
	}
	if m.ID != "" && r.seen[m.ID] {
		r.mu.Unlock()
		return nil
	}
	r.seen[m.ID] = true
	for _, mark := range m.Marks {
		r.marks[conv+"|"+mark] = true
	}
	r.msgs = append(r.msgs, m)
	reply := r.reply
	r.mu.Unlock()
	if reply != nil {
		r.wg.Go(func() { reply(m) })
	}
	return nil
}

func (r *recorder) messages() []channels.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]channels.Message(nil), r.msgs...)
}

// fixture is an adapter wired to a fake Slack, a recorder and real Redis.
type fixture struct {
	slack *slacktest.Server
	a     *Adapter
	h     *recorder
	m     *metrics.Metrics
	mux   *http.ServeMux
	url   string // the adapter's HTTP server
	now   time.Time
}

func newFixture(t testing.TB, edit func(*Config, *Options)) *fixture {
	t.Helper()
	f := &fixture{slack: slacktest.New(t), h: &recorder{}, m: metrics.New(), now: time.Now()}
	cfg := Config{
		BotToken: slacktest.BotToken, SigningSecret: slacktest.Secret, APIURL: f.slack.APIURL(),
		FollowThreads: true, Command: "/parley",
	}
	opts := Options{
		Handler:   f.h,
		Now:       func() time.Time { return f.now },
		RetryWait: 5 * time.Millisecond, ReconnectWait: 10 * time.Millisecond,
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// A fuzz target's F may not log from inside the target: -v logs to
	// the test only where that is a T.
	if _, fuzzing := t.(*testing.F); testing.Verbose() && !fuzzing {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if edit != nil {
		edit(&cfg, &opts)
	}
	a, err := New(cfg, opts, f.m, log)
	if err != nil {
		t.Fatal(err)
	}
	f.a = a
	f.mux = http.NewServeMux()
	a.Mount(f.mux)
	srv := httptest.NewServer(f.mux)
	t.Cleanup(srv.Close)
	t.Cleanup(f.h.wg.Wait)
	f.url = srv.URL
	return f
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func (f *fixture) rejected(reason string) float64 {
	return testutil.ToFloat64(f.m.MessagesRejected.WithLabelValues(Name, reason))
}

func (f *fixture) apiErrors(code string) float64 {
	return testutil.ToFloat64(f.m.ChannelAPIErrors.WithLabelValues(Name, code))
}
