package agent

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/metrics"
)

// lockedBuffer is a log sink safe for the agent's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// twoModels is an Agent whose default model (named "primary-model") falls
// back to "backup" (named "backup-model"), each on a fake server of its
// own, with its log.
type twoModels struct {
	primary, backup *openaitest.Server
	agent           *Agent
	m               *metrics.Metrics
	log             *lockedBuffer
}

func newTwoModels(t *testing.T, primaryRetries, backupRetries int) *twoModels {
	t.Helper()
	tm := &twoModels{primary: openaitest.New(t), backup: openaitest.New(t), m: metrics.New(), log: &lockedBuffer{}}
	noSleep := func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	tm.agent = New(Config{
		Model: "primary-model", MaxRetries: primaryRetries, Fallbacks: []string{"backup"},
		BackoffBase: time.Millisecond, BackoffMax: time.Millisecond, Sleep: noSleep,
		Models: []ModelConfig{{Key: "backup", Name: "backup-model", MaxRetries: backupRetries,
			Client: NewClient(tm.backup.URL(), "sk-backup", nil)}},
	}, NewClient(tm.primary.URL(), "sk-primary", nil), nil, tm.m, slog.New(slog.NewTextHandler(tm.log, nil)))
	return tm
}

func (tm *twoModels) run(t *testing.T, req TurnRequest) TurnResult {
	t.Helper()
	if req.Channel == "" {
		req.Channel = "slack"
	}
	if req.UserText == "" {
		req.UserText = "hello"
	}
	res, err := tm.agent.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (tm *twoModels) count(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return metricValue(t, tm.m, name, labels)
}

// A primary answering 503 is retried within its own budget, then the turn
// moves to the backup, which answers: the user never sees an apology, and
// the metrics tell the story per model.
func TestFallbackFromA503ingPrimary(t *testing.T) {
	tm := newTwoModels(t, 2, 1)
	tm.primary.Script(openaitest.Error(http.StatusServiceUnavailable), openaitest.Error(http.StatusServiceUnavailable), openaitest.Error(http.StatusServiceUnavailable))
	tm.backup.Script(openaitest.Text("from the backup"))
	res := tm.run(t, TurnRequest{})
	if res.Failed || res.Reply != "from the backup" || res.Model != "backup" {
		t.Fatalf("result = %+v, want the backup's answer", res)
	}
	if n := tm.primary.RequestCount(); n != 3 {
		t.Errorf("primary asked %d times, want 1 + its 2 retries", n)
	}
	if reqs := tm.backup.Requests(); len(reqs) != 1 || reqs[0].Model != "backup-model" {
		t.Errorf("backup got %+v, want one request naming backup-model", reqs)
	}
	if h := tm.backup.Headers(); len(h) != 1 || h[0].Get("Authorization") != "Bearer sk-backup" {
		t.Error("the backup was not sent its own key")
	}
	for _, c := range []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"model": "default", "outcome": "retry"}, 2},
		{map[string]string{"model": "default", "outcome": "error"}, 1},
		{map[string]string{"model": "backup", "outcome": "ok"}, 1},
		{map[string]string{"model": "default", "outcome": "ok"}, 0},
	} {
		if got := tm.count(t, "parley_llm_requests_total", c.labels); got != c.want {
			t.Errorf("parley_llm_requests_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
	if got := tm.count(t, "parley_llm_fallbacks_total", map[string]string{"from": "default", "to": "backup"}); got != 1 {
		t.Errorf("parley_llm_fallbacks_total{default→backup} = %v, want 1", got)
	}
	if got := tm.count(t, "parley_llm_tokens_total", map[string]string{"channel": "slack", "model": "backup", "kind": "prompt"}); got <= 0 {
		t.Error("the backup's tokens are not counted under its name")
	}
	if l := tm.log.String(); !strings.Contains(l, "the model is down; the turn falls back") || !strings.Contains(l, "model=default fallback=backup") {
		t.Errorf("the turn's log does not record the fallback:\n%s", l)
	}
}

// A primary that refuses the bot's key is not retried, but the turn still
// falls back, and the log calls it the misconfiguration it is.
func TestFallbackFromA401Primary(t *testing.T) {
	tm := newTwoModels(t, 3, 0)
	tm.primary.Script(openaitest.Error(http.StatusUnauthorized))
	tm.backup.Script(openaitest.Text("backup here"))
	res := tm.run(t, TurnRequest{})
	if res.Failed || res.Reply != "backup here" {
		t.Fatalf("result = %+v", res)
	}
	if n := tm.primary.RequestCount(); n != 1 {
		t.Errorf("a 401 was sent %d times; it is not transient", n)
	}
	l := tm.log.String()
	if !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "refused the bot's configuration") || !strings.Contains(l, "model=default fallback=backup") {
		t.Errorf("the fallback is not logged as a misconfiguration:\n%s", l)
	}
	if strings.Contains(l, "sk-primary") || strings.Contains(l, "sk-backup") {
		t.Error("a key reached the log")
	}
}

// Once a turn has fallen back, its later requests (after tool calls) go
// straight to the model that answered; the next turn starts at the
// primary again.
func TestFallbackStaysForTheTurn(t *testing.T) {
	tm := newTwoModels(t, 0, 0)
	tm.agent.tools = NewRegistry()
	if err := tm.agent.tools.Register(textTool("lookup", "42")); err != nil {
		t.Fatal(err)
	}
	tm.primary.Script(openaitest.Error(http.StatusBadGateway), openaitest.Text("primary again"))
	tm.backup.Script(openaitest.Tools(openaitest.Call("lookup", "{}")), openaitest.Text("the answer is 42"))
	if res := tm.run(t, TurnRequest{}); res.Reply != "the answer is 42" || res.Iterations != 1 {
		t.Fatalf("result = %+v", res)
	}
	if tm.primary.RequestCount() != 1 || tm.backup.RequestCount() != 2 {
		t.Errorf("requests: primary %d, backup %d; want 1 and 2", tm.primary.RequestCount(), tm.backup.RequestCount())
	}
	if res := tm.run(t, TurnRequest{}); res.Reply != "primary again" || res.Model != "default" {
		t.Errorf("next turn = %+v, want the primary's answer", res)
	}
}

// Every model down: the user gets the apology once the last fallback has
// spent its own budget, and each model's budget is its own.
func TestEveryModelDown(t *testing.T) {
	tm := newTwoModels(t, 1, 2)
	for range 2 {
		tm.primary.Script(openaitest.Error(http.StatusTooManyRequests))
	}
	for range 3 {
		tm.backup.Script(openaitest.Error(http.StatusInternalServerError))
	}
	res := tm.run(t, TurnRequest{})
	if !res.Failed || res.Failure != ModelDown || res.Reply != ApologyReply || res.Model != "backup" {
		t.Fatalf("result = %+v", res)
	}
	if tm.primary.RequestCount() != 2 || tm.backup.RequestCount() != 3 {
		t.Errorf("requests: primary %d, backup %d; want 2 and 3", tm.primary.RequestCount(), tm.backup.RequestCount())
	}
	if len(res.Messages) != 1 {
		t.Errorf("a failed turn keeps only the user's message, got %d", len(res.Messages))
	}
}

// A turn may start at another model (its policy's); an unknown name falls
// to the default model rather than failing the turn.
func TestTurnModelChoice(t *testing.T) {
	tm := newTwoModels(t, 0, 0)
	tm.backup.Script(openaitest.Text("chosen"))
	if res := tm.run(t, TurnRequest{Model: "backup"}); res.Reply != "chosen" || res.Model != "backup" || tm.primary.RequestCount() != 0 {
		t.Errorf("result = %+v, primary asked %d times", res, tm.primary.RequestCount())
	}
	tm.primary.Script(openaitest.Text("default"))
	if res := tm.run(t, TurnRequest{Model: "nope"}); res.Reply != "default" || res.Model != "default" {
		t.Errorf("unknown model: result = %+v", res)
	}
	// The backup has no fallback of its own: its failure is the turn's.
	tm.backup.Script(openaitest.Error(http.StatusServiceUnavailable))
	if res := tm.run(t, TurnRequest{Model: "backup"}); !res.Failed || tm.primary.RequestCount() != 1 {
		t.Errorf("a model without fallbacks fell back: %+v", res)
	}
	if tm.agent.HasVision("") != tm.agent.cfg.Vision {
		t.Error("HasVision disagrees with the config")
	}
}
