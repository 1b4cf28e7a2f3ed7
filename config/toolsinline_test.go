package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/config"
)

// The agent's scalar keys sit directly under tools:, beside the tool
// sections: decoded into the agent's type, printed by config check at the
// top of tools:, and loaded again from what was printed.
func TestToolsInlineKeysDecodeAndPrint(t *testing.T) {
	cfg, err := config.Load(writeFile(t, "tools:\n  schema_budget: 4096\n  pinned: [grafana__*, web_fetch]\n  web_fetch:\n    max_bytes: 1048576\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	s, ok := config.Tool[*agent.ToolsSection](cfg, agent.ToolsPartName)
	if !ok || s.SchemaBudget != 4096 || !slices.Equal(s.Pinned, []string{"grafana__*", "web_fetch"}) {
		t.Fatalf("tools part = %+v, %v", s, ok)
	}
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	printed := string(out)
	if !strings.Contains(printed, "tools:\n    schema_budget: 4096\n    pinned:\n        - grafana__*\n") && !strings.Contains(printed, "tools:\n  schema_budget: 4096\n  pinned:\n    - grafana__*\n") {
		t.Errorf("config check does not print the keys at the top of tools:\n%s", printed)
	}
	again, err := config.Load(writeFile(t, printed), env(nil))
	if err != nil {
		t.Fatalf("the printed config does not load: %v\n%s", err, printed)
	}
	if s2, _ := config.Tool[*agent.ToolsSection](again, agent.ToolsPartName); s2.SchemaBudget != 4096 || !slices.Equal(s2.Pinned, s.Pinned) {
		t.Errorf("reloaded = %+v", s2)
	}

	def, err := config.Load("", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := config.Tool[*agent.ToolsSection](def, agent.ToolsPartName); s.SchemaBudget != agent.DefaultSchemaBudget || len(s.Pinned) != 0 {
		t.Errorf("defaults = %+v", s)
	}
}

// A negative budget and a pinned entry that is no tool name are refused
// with their key and line; an unknown key under tools: still is.
func TestToolsInlineKeysRefused(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"tools:\n  schema_budget: -1\n", "line 2: tools.schema_budget: -1 is negative"},
		{"tools:\n  pinned:\n    - ok_tool\n    - \"rm -rf /\"\n", "line 4: tools.pinned[1]: \"rm -rf /\" is not a tool name"},
		{"tools:\n  pinned: [\"[\"]\n", "tools.pinned[0]"},
		{"tools:\n  schema_budgett: 1\n", "schema_budgett"},
	} {
		_, err := config.Load(writeFile(t, tc.file), env(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.file, err, tc.want)
		}
	}
}
