package install_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/parleyhq/parley/agent/toolsource"
	_ "github.com/parleyhq/parley/agent/toolsource/install"
	"github.com/parleyhq/parley/config"
)

// Importing install registers every tool source and its sections under
// tools:, which is all the binary needs to offer them.
func TestInstallRegistersEverySource(t *testing.T) {
	var names []string
	for _, s := range toolsource.Sources() {
		names = append(names, s.Name)
	}
	if len(names) != 2 || names[0] != "mcp" || names[1] != "web" {
		t.Errorf("sources = %v, want [mcp web]", names)
	}
	sections := map[string]bool{}
	for _, s := range config.ToolSections() {
		sections[s.Name] = true
	}
	for _, want := range []string{"mcp", "web_fetch", "web_search"} {
		if !sections[want] {
			t.Errorf("tool section %s is not registered", want)
		}
	}
}

// What config check knows of the sources without opening them comes
// through the registry: an MCP server's unset variable, its tools'
// prefix, and the web tools by name.
func TestSourcesSayWhatConfigCheckKnows(t *testing.T) {
	p := filepath.Join(t.TempDir(), "parley.yaml")
	yaml := "tools:\n  mcp:\n    servers:\n      gh: {command: gh-mcp, env: {GH_TOKEN: \"${GH_TOKEN}\"}}\n"
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	w := toolsource.Warnings(cfg, func(string) string { return "" })
	if len(w) != 1 || w[0] != "tools.mcp.servers.gh: environment variable GH_TOKEN is not set; the server stays down until it is" {
		t.Errorf("warnings = %q", w)
	}
	if w := toolsource.Warnings(cfg, func(string) string { return "set" }); len(w) != 0 {
		t.Errorf("warnings with the variable set = %q", w)
	}
	known := toolsource.KnownNames(cfg)
	if !slices.Equal(known.Prefixes, []string{"gh__"}) || !slices.Contains(known.Tools, "web_fetch") || !slices.IsSorted(known.Tools) {
		t.Errorf("known = %+v, want web_fetch among sorted tools and the gh__ prefix", known)
	}
}
