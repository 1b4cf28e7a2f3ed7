package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/audit"
	"github.com/parleyhq/parley/internal/redistest"
)

// TestAuditCommandReadsTheLedger: `parley audit` reads what the replicas
// recorded, newest first, filtered by user (as asker or approver) and
// tool, as a table or JSON lines; the arguments show only as their
// redacted preview; a filter past the retention or not a duration is a
// usage error, and without REDIS_URL it says where the ledger is.
func TestAuditCommandReadsTheLedger(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	const secret = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	ledger := audit.New(r.Client, audit.Options{Prefix: r.Prefix, Replica: "host-a"})
	for _, e := range []audit.Entry{
		{Kind: audit.KindTool, Channel: "slack", Conversation: "slack:T1:C1:1.2", User: "U1", Tool: "github__create_issue", Class: "write",
			Args: fmt.Sprintf(`{"title":"flaky test","token":%q}`, secret), Approver: "U9", Action: "call", Outcome: "ok", Duration: 1200 * time.Millisecond},
		{Kind: audit.KindTool, Channel: "feishu", User: "ou_2", Tool: "fs__write_file", Class: "write", Args: `{"path":"/tmp/x"}`, Action: "call", Outcome: "denied"},
		{Kind: audit.KindAdmin, User: "alice", Via: "session", Action: "skill off", Target: "release-notes", Outcome: "ok"},
	} {
		if err := ledger.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	cfg := writeConfig(t, fmt.Sprintf("redis:\n  prefix: %q\n", r.Prefix))
	env := map[string]string{"REDIS_URL": r.URL, "OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir()}
	audit := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := run(ctx, append([]string{"audit", "--config", cfg}, args...), strings.NewReader(""), &out, &errb, mapEnv(env))
		return out.String(), errb.String(), code
	}

	out, errs, code := audit("--json")
	if code != 0 {
		t.Fatalf("audit --json exited %d: %s", code, errs)
	}
	var got []map[string]any
	for sc := bufio.NewScanner(strings.NewReader(out)); sc.Scan(); {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("not JSON lines: %v\n%s", err, out)
		}
		got = append(got, e)
	}
	if len(got) != 3 || got[0]["action"] != "skill off" || got[2]["tool"] != "github__create_issue" || got[2]["replica"] != "host-a" {
		t.Fatalf("entries %v; want three, newest first", got)
	}
	if strings.Contains(out, secret) {
		t.Fatalf("the ledger shows a token from the arguments:\n%s", out)
	}
	if got[2]["args_sha256"] == "" || got[2]["approver"] != "U9" {
		t.Errorf("the call's entry %v lacks its argument hash or approver", got[2])
	}

	out, _, code = audit("--user", "U9")
	if code != 0 || !strings.Contains(out, "github__create_issue") || strings.Contains(out, "fs__write_file") || !strings.Contains(out, "TIME (UTC)") {
		t.Errorf("--user U9 (the approver) exited %d:\n%s", code, out)
	}
	out, _, _ = audit("--tool", "fs__write_file")
	if !strings.Contains(out, "denied") || strings.Contains(out, "github__create_issue") {
		t.Errorf("--tool fs__write_file:\n%s", out)
	}
	for _, bad := range [][]string{{"--since", "2000h"}, {"--since", "yesterday"}, {"--limit", "0"}, {"--user", "a\x1bb"}, {"extra"}} {
		if _, _, code := audit(bad...); code != 2 {
			t.Errorf("audit %q exited %d, want 2", bad, code)
		}
	}
	delete(env, "REDIS_URL")
	if _, errs, code := audit(); code != 1 || !strings.Contains(errs, "REDIS_URL") {
		t.Errorf("without Redis: exit %d, %s", code, errs)
	}
}
