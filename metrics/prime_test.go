package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricSeriesOfToolsAreMadeOnUseAndForgotten: no tool series exists
// before a tool is used (not 31 tools × channels × outcomes of zeros, nor
// approvals of tools that never wait for one), and ForgetTools deletes
// every series of the tools it names, and only theirs.
func TestMetricSeriesOfToolsAreMadeOnUseAndForgotten(t *testing.T) {
	m := New()
	for _, name := range []string{"parley_tool_calls_total", "parley_tool_approvals_total", "parley_tool_call_duration_seconds"} {
		if n := testutil.CollectAndCount(m.Registry, name); n != 0 {
			t.Errorf("%d series of %s before any tool ran; want none", n, name)
		}
	}
	for _, tool := range []string{"gh__get_v1", "find_skills"} {
		m.ToolCalls.WithLabelValues("slack", tool, OutcomeOK).Inc()
		m.ToolCalls.WithLabelValues("wechat", tool, OutcomeDenied).Inc()
		m.ToolCallDuration.WithLabelValues(tool).Observe(0.1)
	}
	m.ToolApprovals.WithLabelValues("slack", "gh__get_v1", ApprovalOutcomes[0]).Inc()

	m.ForgetTools("gh__get_v1", "never_used")
	if n := testutil.CollectAndCount(m.ToolCalls); n != 2 {
		t.Errorf("%d call series left; want find_skills' 2", n)
	}
	if n := testutil.CollectAndCount(m.ToolApprovals); n != 0 {
		t.Errorf("%d approval series left; want none", n)
	}
	if n := testutil.CollectAndCount(m.ToolCallDuration); n != 1 {
		t.Errorf("%d duration series left; want find_skills' 1", n)
	}
	if v := testutil.ToFloat64(m.ToolCalls.WithLabelValues("slack", "find_skills", OutcomeOK)); v != 1 {
		t.Errorf("find_skills' count = %v after another tool was forgotten; want 1", v)
	}
}
