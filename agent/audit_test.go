package agent

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/audit"
	"github.com/parleyhq/parley/metrics"
)

// auditRecorder is an audit.Recorder that keeps what it is given.
type auditRecorder struct {
	mu      sync.Mutex
	entries []audit.Entry
}

func (r *auditRecorder) Record(_ context.Context, e audit.Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, e)
	return nil
}

func (r *auditRecorder) all() []audit.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]audit.Entry(nil), r.entries...)
}

// TestToolCallLedgerRecordsWriteCalls: every write call of a turn is
// recorded with who asked, the outcome and the arguments (for the ledger
// to hash and redact); reads are not; an approved call names its
// approver, and a denied one is recorded as denied, not run.
func TestToolCallLedgerRecordsWriteCalls(t *testing.T) {
	save := funcTool{name: "save", writes: true, fn: func(context.Context, *TurnContext, json.RawMessage) (Result, error) {
		return Result{Content: "saved"}, nil
	}}
	h := newHarness(t, Config{}, []Tool{save, textTool("read", "data")})
	rec := &auditRecorder{}
	req := TurnRequest{Channel: "slack", Conversation: "slack:T:C:1", User: "U1", UserText: "save", Audit: rec}

	h.srv.Script(openaitest.Tools(openaitest.Call("save", `{"n":1}`), openaitest.Call("read", "{}")), openaitest.Text("done"))
	h.run(t, req)
	got := rec.all()
	if len(got) != 1 {
		t.Fatalf("entries = %+v; want the one write call", got)
	}
	if e := got[0]; e.Kind != audit.KindTool || e.Tool != "save" || e.Class != "write" || e.User != "U1" || e.Channel != "slack" ||
		e.Conversation != "slack:T:C:1" || e.Args != `{"n":1}` || e.Outcome != metrics.OutcomeOK || e.Approver != "" {
		t.Fatalf("entry = %+v", e)
	}

	// The same call, paused for approval: nothing is recorded until it
	// is decided, then the decision's outcome with its approver.
	for _, tc := range []struct {
		verdict Verdict
		outcome string
	}{
		{Verdict{Approved: true, By: "U2"}, metrics.OutcomeOK},
		{Verdict{Refusal: "denied by U3", By: "U3"}, metrics.OutcomeDenied},
	} {
		rec.entries = nil
		paused := req
		paused.Approve = func(tool string, writes bool) bool { return writes }
		h.srv.Script(openaitest.Tools(openaitest.Call("save", `{"n":2}`)))
		res := h.run(t, paused)
		if res.Paused == nil || len(rec.all()) != 0 {
			t.Fatalf("paused = %v, entries %+v; want a pause and nothing recorded yet", res.Paused, rec.all())
		}
		h.srv.Script(openaitest.Text("done"))
		resumed := paused
		resumed.Resume = &Resume{State: res.Paused.State, Verdict: tc.verdict}
		h.run(t, resumed)
		got := rec.all()
		if len(got) != 1 || got[0].Approver != tc.verdict.By || got[0].Outcome != tc.outcome || got[0].Args != `{"n":2}` {
			t.Fatalf("after %+v: entries = %+v; want one with approver %s and outcome %s", tc.verdict, got, tc.verdict.By, tc.outcome)
		}
	}
}
