package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/triggers/schedule"
)

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
