package skills

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBuiltinExtraction(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(BuiltinCacheDir(home), "web-access")
	marker := filepath.Join(dir, "marker")
	load := func(version, body string) *Catalog {
		t.Helper()
		c, err := Load(Layers{Builtin: builtinFS(version, body), Home: home})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }

	c := load("1.0.0", "body\n")
	if s := mustGet(t, c, "web-access"); readBody(t, s) != "body\n" || s.Path != filepath.Join(dir, "SKILL.md") {
		t.Fatalf("got %+v", s)
	}
	if fi, err := os.Stat(filepath.Join(dir, "scripts", "run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("script not extracted executable: %v %v", fi, err)
	}
	if !exists(filepath.Join(dir, "references", "site-patterns", "github.com.md")) {
		t.Error("references not extracted")
	}
	if exists(filepath.Join(BuiltinCacheDir(home), "not-a-skill")) {
		t.Error("folder without SKILL.md extracted")
	}
	writeTree(t, dir, map[string]string{"marker": "left by the test"})

	steps := []struct {
		name      string
		prepare   func()
		version   string
		body      string
		rewritten bool
	}{
		{"same version and files: untouched", nil, "1.0.0", "body\n", false},
		{"edited files, same declared version: rewritten", nil, "1.0.0", "new body\n", true},
		{"unchanged again: untouched", nil, "1.0.0", "new body\n", false},
		{"version bump: rewritten", nil, "2.0.0", "new body\n", true},
		{"tampered .version: rewritten", func() { writeTree(t, dir, map[string]string{".version": "junk"}) }, "2.0.0", "new body\n", true},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			writeTree(t, dir, map[string]string{"marker": "x"})
			if st.prepare != nil {
				st.prepare()
			}
			c := load(st.version, st.body)
			if got := exists(marker); got == st.rewritten {
				t.Errorf("marker present=%v, want rewritten=%v", got, st.rewritten)
			}
			if s := mustGet(t, c, "web-access"); readBody(t, s) != st.body || s.Version != st.version {
				t.Errorf("body %q version %q", readBody(t, s), s.Version)
			}
		})
	}
	entries, _ := os.ReadDir(BuiltinCacheDir(home))
	if len(entries) != 1 {
		t.Errorf("leftover temporary folders: %v", entries)
	}
}
