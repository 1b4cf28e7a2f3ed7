package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestPrimeToolsPrimesApprovals: every approval outcome of every tool is
// a series at zero for every channel before the first approval, so that a
// dashboard shows 0, not "no data".
func TestPrimeToolsPrimesApprovals(t *testing.T) {
	m := New()
	m.PrimeTools([]string{"feishu", "slack"}, []string{"ledger__append", "save_skill_reference"})
	if n := testutil.CollectAndCount(m.ToolApprovals, "parley_tool_approvals_total"); n != 2*2*len(ApprovalOutcomes) {
		t.Fatalf("%d approval series primed; want %d", n, 2*2*len(ApprovalOutcomes))
	}
	for _, o := range ApprovalOutcomes {
		if v := testutil.ToFloat64(m.ToolApprovals.WithLabelValues("feishu", "save_skill_reference", o)); v != 0 {
			t.Errorf("%s primed at %v", o, v)
		}
	}
}
