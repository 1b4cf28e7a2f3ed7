package skills

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/skills/builtin"
)

func TestShippedBuiltins(t *testing.T) {
	if ws := Lint("builtin"); len(ws) != 0 {
		t.Fatalf("builtin skills are not lint-clean: %v", ws)
	}
	home := t.TempDir()
	c, err := Load(Layers{Builtin: builtin.FS, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	if ws := c.Warnings(); len(ws) != 0 {
		t.Fatalf("warnings: %v", ws)
	}
	s := mustGet(t, c, "skill-authoring")
	if s.Source != SourceBuiltin || len(readBody(t, s)) > BodyChunkBytes {
		t.Errorf("source %q, body %d bytes (must fit one injection)", s.Source, len(readBody(t, s)))
	}
	if ws := Lint(BuiltinCacheDir(home)); len(ws) != 0 {
		t.Errorf("extracted cache is not lint-clean: %v", ws)
	}
	ref, err := ReadFile(s, home, "references/frontmatter.md", 0)
	if err != nil || !strings.Contains(ref, "disable-model-invocation") {
		t.Errorf("reference: %v", err)
	}
	if idx, omitted := c.Index(nil); !strings.Contains(idx, "- skill-authoring: ") || !strings.Contains(idx, "- web-access: ") || len(omitted) != 0 {
		t.Errorf("index %q omitted %v", idx, omitted)
	}

	web := mustGet(t, c, "web-access")
	if web.Source != SourceBuiltin || len(readBody(t, web)) > BodyChunkBytes {
		t.Errorf("web-access: source %q, body %d bytes (must fit one injection)", web.Source, len(readBody(t, web)))
	}
	if got := web.Metadata["requires-tools"]; got != "web_fetch web_search" {
		t.Errorf("web-access requires-tools = %q", got)
	}
	if len(web.AllowedTools) != 0 {
		t.Errorf("web-access must not narrow the tools (its fallback is a browser MCP tool): %v", web.AllowedTools)
	}
	for _, want := range []string{"web_search", "web_fetch", "offset", "login wall", "browser", "sources", "references/fallbacks.md"} {
		if !strings.Contains(strings.ToLower(readBody(t, web)), want) {
			t.Errorf("web-access body does not mention %q", want)
		}
	}
	if ref, err := ReadFile(web, home, "references/fallbacks.md", 0); err != nil || !strings.Contains(ref, "raw.githubusercontent.com") {
		t.Errorf("web-access reference: %v", err)
	}
}
