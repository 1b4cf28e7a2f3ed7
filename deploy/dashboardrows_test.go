package deploy

import (
	"slices"
	"strings"
	"testing"
)

// rowsOf maps each panel's title to the title of the row above it (the
// dashboard's rows are not collapsed: a row holds what lies below it up to
// the next row), and returns the rows in order.
func rowsOf(d dashboard) (map[string]string, []string) {
	ps := slices.Clone(d.Panels)
	slices.SortStableFunc(ps, func(a, b panel) int {
		if a.GridPos.Y != b.GridPos.Y {
			return a.GridPos.Y - b.GridPos.Y
		}
		return a.GridPos.X - b.GridPos.X
	})
	in, row := map[string]string{}, ""
	var rows []string
	for _, p := range ps {
		if p.Type == "row" {
			row = p.Title
			rows = append(rows, row)
			continue
		}
		in[p.Title] = row
	}
	return in, rows
}

// TestDashboardRowsOneTopicEach: one Tools row (there were two, "Tools &
// policy" and "Tools and MCP servers", one panel in both); the webhook
// answer time with the latencies and the attachments with the channels,
// not in a "Process" row of their own; skill use by channel counts the
// /skill:NAME invocations beside the model's loads.
func TestDashboardRowsOneTopicEach(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	in, rows := rowsOf(d)
	tools := 0
	for _, r := range rows {
		if strings.Contains(r, "Tool") {
			tools++
		}
	}
	if tools != 1 || slices.Contains(rows, "Process") {
		t.Errorf("rows %q: want one Tools row and no Process row", rows)
	}
	for panel, row := range map[string]string{
		"Webhook answer time p99": "Latency", "Attachments": "Channels",
		"MCP servers up": "Tools", "Tool call duration p90": "Tools", "Denied tool calls": "Tools",
	} {
		if in[panel] != row {
			t.Errorf("panel %q is in row %q, want %q", panel, in[panel], row)
		}
	}
	for _, p := range allPanels(d.Panels) {
		if p.Title != "Skill use by channel" {
			continue
		}
		var exprs []string
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
		all := strings.Join(exprs, "\n")
		if !strings.Contains(all, "parley_skill_loads_total") || !strings.Contains(all, "parley_skill_invocations_total") || !strings.Contains(all, "by (channel") {
			t.Errorf("skill use by channel queries %q; want the loads and the /skill:NAME invocations by channel", exprs)
		}
		return
	}
	t.Error("no panel \"Skill use by channel\"")
}
