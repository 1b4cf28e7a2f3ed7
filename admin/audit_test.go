package admin_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/parleyhq/parley/audit"
)

// TestToolCallLedgerAuditPage: the console's Audit page lists the
// ledger of every replica with the filters of `parley audit` — a tool
// call's token redacted, a console change beside it — and refuses a forged
// or oversized filter with a 400 before reading anything.
func TestToolCallLedgerAuditPage(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := w.replica(t, "a", options{})
	c := r.client(t)
	csrf := c.signIn()
	ctx := context.Background()
	if got := c.post("/admin/skills", url.Values{"csrf": {csrf}, "action": {"off"}, "skill": {"release-notes"}}); got.status != http.StatusSeeOther {
		t.Fatalf("skill off: %d", got.status)
	}
	// Another replica's write call.
	const token = "ghp_abcdefghijklmnopqrstuvwxyz0123"
	other := audit.New(w.redis.Client, audit.Options{Prefix: w.redis.Prefix, Replica: "replica-b"})
	for _, e := range []audit.Entry{
		{Kind: audit.KindTool, Action: "call", Channel: "slack", Conversation: "slack:T1:C1:t1", User: "U1", Tool: "deploy", Class: "write",
			Args: `{"env":"prod","token":"` + token + `"}`, Approver: "UOPS", Outcome: "ok"},
		{Kind: audit.KindTool, Action: "call", User: "U2", Tool: "create_issue", Class: "write", Args: `{"title":"<b>x</b>"}`, Outcome: "error"},
	} {
		if err := other.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}

	page := c.get("/admin/audit")
	if page.status != http.StatusOK {
		t.Fatalf("GET /admin/audit: %d", page.status)
	}
	for _, want := range []string{"skill off", "release-notes", "deploy", "replica-b", "UOPS", "[redacted]", "create_issue", "&lt;b&gt;"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the Audit page lacks %q", want)
		}
	}
	if strings.Contains(page.body, token) || strings.Contains(page.body, "<b>x</b>") {
		t.Error("the Audit page shows a token or unescaped markup")
	}
	deploys := c.get("/admin/audit?tool=deploy&user=U1&since=1h")
	if deploys.status != http.StatusOK || !strings.Contains(deploys.body, "UOPS") || strings.Contains(deploys.body, "create_issue") || strings.Contains(deploys.body, "release-notes") {
		t.Errorf("filtered by tool and user: %d, %s", deploys.status, deploys.body)
	}

	for _, q := range []string{
		"since=yesterday", "since=100000h", "since=-1h", "since=" + strings.Repeat("9", 64) + "h",
		"user=" + strings.Repeat("x", 5000), "tool=deploy%00", "user=a%0Ab", "user=U1&user=U2", "limit=100000", "limit=-1",
	} {
		got := c.get("/admin/audit?" + q)
		if got.status != http.StatusBadRequest {
			t.Errorf("GET /admin/audit?%.60s: %d, want 400", q, got.status)
		}
		if strings.Contains(got.body, "UOPS") {
			t.Errorf("a refused filter %.60s still listed entries", q)
		}
	}
	// Nobody signed in reads nothing.
	if got := r.client(t).get("/admin/audit", "Authorization", "Bearer wrong"); got.status != http.StatusUnauthorized {
		t.Errorf("the Audit page without signing in: %d, want 401", got.status)
	}
}
