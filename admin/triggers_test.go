package admin_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/triggers"
	"github.com/parleyhq/parley/triggers/schedule"
	"github.com/parleyhq/parley/triggers/webhook"
)

// noSubmitter fails a test that reaches it: the requests sent here are
// all refused before any work is made.
type noSubmitter struct{ t *testing.T }

func (s noSubmitter) SubmitWork(context.Context, triggers.Work) error {
	s.t.Error("a refused webhook request was submitted")
	return nil
}

// refusedAt is when refuseWebhook's request is served.
var refusedAt = time.Date(2026, 3, 2, 8, 30, 15, 0, time.UTC)

// refuseWebhook serves the world's webhooks as `parley serve` does and
// sends POST /hooks/am without its token, which the webhook refuses and
// records as its last request in the world's Redis.
func refuseWebhook(t *testing.T, w *world) {
	t.Helper()
	mux := http.NewServeMux()
	webhook.New(webhook.Options{Webhooks: testWebhooks(t), Submitter: noSubmitter{t}, Redis: w.redis.Client, Prefix: w.redis.Prefix, Metrics: metrics.New(),
		Now: func() time.Time { return refusedAt }}).Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/hooks/am", "application/json", bytes.NewReader([]byte(`{"version":"4","alerts":[]}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an unauthenticated webhook request: %d", resp.StatusCode)
	}
}

// TestTriggersPageListsSchedules: the Triggers page shows the file's
// schedules with their next fire and the latest result the schedulers
// recorded; an error text (which may quote a platform's answer) is
// escaped, never markup.
func TestTriggersPageListsSchedules(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.replica(t, "a", options{})
	at := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	claims := schedule.NewClaims(w.redis.Client, w.redis.Prefix)
	if err := claims.Record(context.Background(), "digest", schedule.Result{At: at, Outcome: "error", Error: `<script>alert(1)</script>`}); err != nil {
		t.Fatal(err)
	}
	c := a.client(t)
	c.signIn()
	got := c.get("/admin/triggers")
	if got.status != http.StatusOK {
		t.Fatalf("GET /admin/triggers: %d", got.status)
	}
	has(t, "triggers", got.body, "digest", "0 9 * * 1-5", "config", "C1", "error at 2026-03-02 08:00", `<script>alert(1)</script>`)
	if strings.Contains(got.body, "<script>alert(1)") {
		t.Error("the error text is markup on the page")
	}
}

// TestTriggersPageListsWebhooksWithTheirLastRequest: beside the schedules,
// every webhook of the file with its kind, its path and the outcome of
// the last request any replica served (what `parley triggers list`
// shows), or that none came yet; never its token.
func TestTriggersPageListsWebhooksWithTheirLastRequest(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.replica(t, "a", options{})
	c := a.client(t)
	c.signIn()
	before := c.get("/admin/triggers")
	has(t, "triggers before a request", before.body, "<code>am</code>", "alertmanager", "POST /hooks/am", "<code>deploy</code>", "json", "no request yet")
	if strings.Contains(before.body, "unauthorized at") {
		t.Fatal("a last request shows before any came")
	}
	refuseWebhook(t, w)
	got := c.get("/admin/triggers")
	if got.status != http.StatusOK {
		t.Fatalf("GET /admin/triggers: %d", got.status)
	}
	has(t, "triggers", got.body, "unauthorized at 2026-03-02 08:30:15", "no request yet", "Schedules", "digest")
	if i, j := strings.Index(got.body, `id="webhooks"`), strings.Index(got.body, `id="schedules"`); i < 0 || j < i {
		t.Error("the webhooks are not listed before the schedules, as parley triggers list prints them")
	}
	for _, secret := range []string{"am-t0ken-never-shown", "deploy-t0ken-never-shown"} {
		if strings.Contains(got.body, secret) {
			t.Errorf("the page shows a webhook's token")
		}
	}
}
