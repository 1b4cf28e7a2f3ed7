package audit_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/audit"
	"github.com/parleyhq/parley/internal/redistest"
)

// clock is a test's settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newLedger(t *testing.T, retention time.Duration) (*audit.Ledger, *clock, *redistest.Redis) {
	t.Helper()
	r := redistest.New(t)
	c := &clock{t: time.Now()}
	return audit.New(r.Client, audit.Options{Prefix: r.Prefix, Retention: retention, Replica: "r1", Now: c.now}), c, r
}

// TestToolCallLedgerRecordsWhoRanWhat: an entry comes back with
// everything the operator asks about (time, replica, channel,
// conversation, user, tool, class, argument hash, preview, approver,
// outcome, duration), the arguments themselves not stored.
func TestToolCallLedgerRecordsWhoRanWhat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _, r := newLedger(t, 0)
	args := `{"repo":"parley","title":"Fix it"}`
	if err := l.Record(ctx, audit.Entry{Kind: audit.KindTool, Action: "call", Channel: "slack", Conversation: "slack:T:C:1",
		User: "U1", Tool: "create_issue", Class: "write", Args: args, Approver: "U2", Outcome: "ok", Duration: 1500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	got, err := l.Query(ctx, audit.Filter{})
	if err != nil || len(got) != 1 {
		t.Fatalf("Query = %v, %v; want one entry", got, err)
	}
	e := got[0]
	if e.Replica != "r1" || e.Channel != "slack" || e.Conversation != "slack:T:C:1" || e.User != "U1" || e.Tool != "create_issue" ||
		e.Class != "write" || e.Approver != "U2" || e.Outcome != "ok" || e.Duration != 1500*time.Millisecond || e.Time.IsZero() {
		t.Fatalf("entry = %+v", e)
	}
	if e.ArgsSHA256 != audit.HashArgs(args) || e.Preview != `{"repo":"parley","title":"Fix it"}` {
		t.Fatalf("hash %q preview %q", e.ArgsSHA256, e.Preview)
	}
	if l.Key() != r.Prefix+"audit" {
		t.Fatalf("key %q is not under the prefix %q", l.Key(), r.Prefix)
	}
}

// TestToolCallLedgerRedactsTokens: an argument carrying a token, a
// password or a key never reaches the stream, whether it is named as one
// or only looks like one.
func TestToolCallLedgerRedactsTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _, r := newLedger(t, 0)
	secrets := []string{
		"xoxb-123456789012-abcdefABCDEF", "sk-proj-abcdefghijklmnopqrstuvwx", "ghp_abcdefghijklmnopqrstuvwxyz0123",
		"AKIAABCDEFGHIJKLMNOP", "hunter2-is-my-password", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
		"Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdo", "s3cr3t-pa55",
	}
	args := `{"password":"hunter2-is-my-password","config":{"api_key":"s3cr3t-pa55"},` +
		`"note":"use xoxb-123456789012-abcdefABCDEF or sk-proj-abcdefghijklmnopqrstuvwx",` +
		`"header":"Authorization: Bearer ghp_abcdefghijklmnopqrstuvwxyz0123",` +
		`"url":"https://bot:s3cr3t-pa55@example.com/x?token=AKIAABCDEFGHIJKLMNOP&page=2",` +
		`"jwt":"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl","blob":"Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdo"}`
	for _, e := range []audit.Entry{
		{Kind: audit.KindTool, Action: "call", Tool: "deploy", Args: args, Outcome: "ok"},
		{Kind: audit.KindTool, Action: "call", Tool: "deploy", Args: "not json: password=hunter2-is-my-password xoxb-123456789012-abcdefABCDEF", Outcome: "error"},
	} {
		if err := l.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := r.Client.XRange(ctx, l.Key(), "-", "+").Result()
	if err != nil || len(raw) != 2 {
		t.Fatalf("XRANGE = %v, %v", raw, err)
	}
	for _, m := range raw {
		stored := m.Values["e"].(string)
		for _, s := range secrets {
			if strings.Contains(stored, s) {
				t.Errorf("the stream holds the secret %q: %s", s, stored)
			}
		}
		if !strings.Contains(stored, "[redacted]") {
			t.Errorf("nothing was marked redacted: %s", stored)
		}
	}
	got, _ := l.Query(ctx, audit.Filter{})
	if p := got[1].Preview; !strings.Contains(p, "@example.com/x?token=[redacted]&") {
		t.Errorf("the preview lost what is not secret: %s", p)
	}
}

// TestToolCallLedgerBoundsHugeArguments: a megabyte of arguments is
// hashed whole and previewed in a few hundred characters.
func TestToolCallLedgerBoundsHugeArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _, r := newLedger(t, 0)
	huge := `{"body":"` + strings.Repeat("word ", 200_000) + `"}`
	if err := l.Record(ctx, audit.Entry{Kind: audit.KindTool, Action: "call", Tool: "write_file", Args: huge,
		User: strings.Repeat("u", 10_000), Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	raw, err := r.Client.XRange(ctx, l.Key(), "-", "+").Result()
	if err != nil || len(raw) != 1 {
		t.Fatalf("XRANGE = %v, %v", raw, err)
	}
	if n := len(raw[0].Values["e"].(string)); n > 2000 {
		t.Fatalf("a huge argument took %d bytes of the ledger", n)
	}
	got, _ := l.Query(ctx, audit.Filter{})
	if got[0].ArgsSHA256 != audit.HashArgs(huge) {
		t.Fatal("the hash is not of the whole arguments")
	}
	if n := len([]rune(got[0].Preview)); n > audit.MaxPreview {
		t.Fatalf("preview of %d runes, want at most %d", n, audit.MaxPreview)
	}
}

// TestToolCallLedgerRetention: what is older than audit.retention is
// trimmed from the stream as new entries come, and never returned.
func TestToolCallLedgerRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, c, r := newLedger(t, time.Hour)
	// Redis numbers the entries by its own clock, now; the ledger's clock
	// decides what is old.
	for range 3 {
		_ = l.Record(ctx, audit.Entry{Kind: audit.KindAdmin, Action: "old", Outcome: "ok"})
	}
	c.add(30 * time.Minute)
	if got, _ := l.Query(ctx, audit.Filter{Since: time.Hour}); len(got) != 3 {
		t.Fatalf("within the retention: %d entries, want 3", len(got))
	}
	c.add(2 * time.Hour)
	if got, _ := l.Query(ctx, audit.Filter{Since: time.Hour}); len(got) != 0 {
		t.Fatalf("past the retention, read: %d entries, want 0", len(got))
	}
	_ = l.Record(ctx, audit.Entry{Kind: audit.KindAdmin, Action: "new", Outcome: "ok"})
	if n, err := r.Client.XLen(ctx, l.Key()).Result(); err != nil || n != 0 {
		// The new entry's id is Redis's now, which the ledger's clock
		// has left behind too: everything older than an hour before it goes.
		t.Fatalf("XLEN after a record past the retention = %d, %v; want the old entries trimmed", n, err)
	}
}

// TestToolCallLedgerFilters: the user (as asker or approver) and the
// tool select; a forged or oversized filter is refused before Redis is
// asked.
func TestToolCallLedgerFilters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _, _ := newLedger(t, 0)
	for _, e := range []audit.Entry{
		{Kind: audit.KindTool, Action: "call", User: "alice", Tool: "deploy", Outcome: "ok"},
		{Kind: audit.KindTool, Action: "call", User: "bob", Tool: "deploy", Approver: "alice", Outcome: "ok"},
		{Kind: audit.KindTool, Action: "call", User: "bob", Tool: "create_issue", Outcome: "error"},
	} {
		_ = l.Record(ctx, e)
	}
	count := func(f audit.Filter) int {
		got, err := l.Query(ctx, f)
		if err != nil {
			t.Fatalf("Query(%+v): %v", f, err)
		}
		return len(got)
	}
	if n := count(audit.Filter{User: "alice"}); n != 2 {
		t.Errorf("user alice: %d entries, want 2 (one asked, one approved)", n)
	}
	if n := count(audit.Filter{Tool: "deploy", User: "bob"}); n != 1 {
		t.Errorf("bob's deploys: %d, want 1", n)
	}
	if n := count(audit.Filter{Limit: 1}); n != 1 {
		t.Errorf("limit 1: %d", n)
	}
	if got, _ := l.Query(ctx, audit.Filter{}); got[0].Tool != "create_issue" {
		t.Errorf("not newest first: %+v", got)
	}
	for _, f := range []audit.Filter{
		{Since: -time.Hour}, {Since: 10000 * time.Hour}, {Limit: audit.MaxLimit + 1},
		{User: strings.Repeat("x", 5000)}, {Tool: "deploy\x00"}, {User: "a\nb"},
	} {
		if _, err := l.Query(ctx, f); !errors.Is(err, audit.ErrFilter) {
			t.Errorf("Query(%+v) = %v; want ErrFilter", f, err)
		}
	}
	for _, in := range [][4]string{{"yesterday", "", "", ""}, {"", "", "", "-3"}, {"", "", "", "many"}, {strings.Repeat("1", 40) + "h", "", "", ""}} {
		if _, err := audit.ParseFilter(in[0], in[1], in[2], in[3]); !errors.Is(err, audit.ErrFilter) {
			t.Errorf("ParseFilter(%q) = %v; want ErrFilter", in, err)
		}
	}
}
