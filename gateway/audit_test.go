package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/audit"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/gateway/approval"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

// TestToolCallLedgerRecordsApprovals: a write call that waits for
// approval leaves three entries in the audit ledger — asked for (by whom),
// decided (by whom, how) and run (approved by whom, with what outcome) —
// and a token in its arguments is in none of them.
func TestToolCallLedgerRecordsApprovals(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	_, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	ch := newRecorder("slack")
	ledger := audit.New(r.Client, audit.Options{Prefix: r.Prefix, Replica: "replica-a"})
	a := newApprovalReplicaWith(t, r, mcpURL, model, ch, time.Hour, time.Hour, "slack", func(g *gateway.Config, _ *agent.Config) { g.Audit = ledger })

	const token = "xoxb-123456789012-abcdefABCDEF"
	submit(t, a.gw, from("U1", "E1", "log deploy with "+token))
	p := ch.waitFor(t, 0, "with an approval prompt", isPrompt)
	submit(t, a.gw, from("UADMIN", "E2", "/approve "+ch.at(p).Approval.Code))
	ch.waitFor(t, p, "with the model's answer", textHas("done: appended line"))

	got, err := ledger.Query(context.Background(), audit.Filter{Tool: "ledger__append"})
	if err != nil {
		t.Fatal(err)
	}
	byAction := map[string]audit.Entry{}
	for _, e := range got {
		byAction[e.Kind+" "+e.Action] = e
		if strings.Contains(e.Preview, token) {
			t.Errorf("the ledger holds the token: %+v", e)
		}
	}
	asked, decided, ran := byAction["approval approval requested"], byAction["approval approval decided"], byAction["tool call"]
	if asked.User != "U1" || asked.Outcome != approval.Pending || asked.Class != "write" || asked.ArgsSHA256 == "" {
		t.Errorf("requested: %+v", asked)
	}
	if decided.User != "U1" || decided.Approver != "UADMIN" || decided.Outcome != approval.Approved {
		t.Errorf("decided: %+v", decided)
	}
	if ran.User != "U1" || ran.Approver != "UADMIN" || ran.Outcome != metrics.OutcomeOK || ran.Channel != "slack" ||
		ran.Conversation == "" || ran.Replica != "replica-a" || ran.ArgsSHA256 != asked.ArgsSHA256 {
		t.Errorf("ran: %+v", ran)
	}
	if len(got) != 3 {
		t.Errorf("entries: %+v; want 3", got)
	}
	if mine, _ := ledger.Query(context.Background(), audit.Filter{User: "UADMIN"}); len(mine) != 2 {
		t.Errorf("entries UADMIN approved: %d, want 2 (the decision and the call)", len(mine))
	}
}
