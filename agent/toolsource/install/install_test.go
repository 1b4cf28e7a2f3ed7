package install_test

import (
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
