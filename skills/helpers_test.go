package skills

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree creates files (slash paths relative to root) with their content.
func writeTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// skillMD builds a minimal SKILL.md.
func skillMD(name, desc, body string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n---\n" + body
}

// hasWarning reports whether any warning message contains substr.
func hasWarning(ws []Warning, substr string) bool {
	for _, w := range ws {
		if strings.Contains(w.Msg, substr) {
			return true
		}
	}
	return false
}

func symlinkOrSkip(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks unsupported: %v", err)
	}
}

// readBody is s.ReadBody, failing the test on an error.
func readBody(t testing.TB, s *Skill) string {
	t.Helper()
	b, err := s.ReadBody()
	if err != nil {
		t.Fatalf("read the body of %s: %v", s.Name, err)
	}
	return b
}
