package slack

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/metrics"
)

// syncBuffer is a log sink shared by the handler goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(substr string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range strings.Split(s.b.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// An attacker's flood of forged requests is counted in full but logged
// one line per reason per interval; the next line says how many were
// left out.
func TestRefusedRequestLogsAreRateLimited(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	logs := &syncBuffer{}
	m := metrics.New()
	fake := slacktest.New(t)
	a, err := New(Config{BotToken: slacktest.BotToken, SigningSecret: slacktest.Secret, APIURL: fake.APIURL(), Command: "/parley"},
		Options{Handler: &recorder{}, Now: clock}, m, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	a.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	forge := func() {
		t.Helper()
		req := slacktest.Signed(t, srv.URL+EventsPath, "not-the-secret", clock(), mustJSON(t, slacktest.Event("Ev1", slacktest.Mention("C1", "U1", "1.1", "", "hi"))))
		if status, _ := slacktest.Do(t, req); status != http.StatusUnauthorized {
			t.Fatalf("forged request: status %d", status)
		}
	}
	for range 1000 {
		forge()
	}
	if got := testutil.ToFloat64(m.MessagesRejected.WithLabelValues(Name, "bad_signature")); got != 1000 {
		t.Fatalf("rejected{bad_signature} = %v; the metric must count every refusal", got)
	}
	if lines := logs.lines("request refused"); len(lines) != 1 {
		t.Fatalf("%d log lines for 1000 forged requests within one interval; want 1:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	// A request over the size limit is another reason: a line of its own.
	big := slacktest.Signed(t, srv.URL+EventsPath, slacktest.Secret, clock(), bytes.Repeat([]byte("x"), 2<<20))
	if status, _ := slacktest.Do(t, big); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized request: status %d", status)
	}
	if lines := logs.lines("reason=too_large"); len(lines) != 1 {
		t.Fatalf("oversized request logged %d lines", len(lines))
	}
	mu.Lock()
	now = now.Add(10 * time.Second)
	mu.Unlock()
	forge()
	lines := logs.lines("reason=bad_signature")
	if len(lines) != 2 || !strings.Contains(lines[1], "suppressed=999") {
		t.Fatalf("after the interval: %q; want a second line reporting the 999 left out", lines)
	}
}
