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
	if s.Source != SourceBuiltin || len(s.Body) > BodyChunkBytes {
		t.Errorf("source %q, body %d bytes (must fit one injection)", s.Source, len(s.Body))
	}
	if ws := Lint(BuiltinCacheDir(home)); len(ws) != 0 {
		t.Errorf("extracted cache is not lint-clean: %v", ws)
	}
	ref, err := ReadFile(s, home, "references/frontmatter.md", 0)
	if err != nil || !strings.Contains(ref, "disable-model-invocation") {
		t.Errorf("reference: %v", err)
	}
	if idx, omitted := c.Index(nil); !strings.Contains(idx, "- skill-authoring: ") || len(omitted) != 0 {
		t.Errorf("index %q omitted %v", idx, omitted)
	}
}
