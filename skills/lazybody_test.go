package skills

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCatalogKeepsBodiesOnDisk: a loaded catalog holds the frontmatter
// only; the body is read from SKILL.md when the skill is loaded, through
// the same fence, and only while the file is the one the catalog loaded.
func TestCatalogKeepsBodiesOnDisk(t *testing.T) {
	home := t.TempDir()
	root := UserSkillsDir(home)
	body := "# Deploy\n\nRun the checklist.\n"
	md := "\ufeff---\r\nname: deploy\r\ndescription: Ship it.\r\n---\r\n\r\n" + strings.ReplaceAll(body, "\n", "\r\n")
	writeTree(t, root, map[string]string{"deploy/SKILL.md": md})
	c, err := Load(Layers{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	s := mustGet(t, c, "deploy")
	if s.Body != "" {
		t.Fatalf("the catalog holds the body at start: %q", s.Body)
	}
	if s.BodyBytes() != len(body) || s.BodyLine != 6 {
		t.Errorf("body bytes %d line %d, want %d and 6", s.BodyBytes(), s.BodyLine, len(body))
	}
	if got := readBody(t, s); got != body {
		t.Errorf("body read from disk %q, want %q", got, body)
	}
	if inj := InjectionText(s); !strings.HasSuffix(inj, body) {
		t.Errorf("injection does not end with the body:\n%s", inj)
	}
	if got, err := ReadFile(s, home, "SKILL.md", 0); err != nil || got != body {
		t.Errorf("load_skill(file=SKILL.md) = %q, %v", got, err)
	}
	// The index is the same whether the body is in memory or not.
	parsed, _, err := ParseSkillFile(s.Path, []byte(md))
	if err != nil {
		t.Fatal(err)
	}
	inMemory := &Catalog{byName: map[string]*Skill{"deploy": parsed}, sorted: []*Skill{parsed}}
	if a, b := func() string { x, _ := c.Index(nil); return x }(), func() string { x, _ := inMemory.Index(nil); return x }(); a != b {
		t.Errorf("index differs: %q vs %q", a, b)
	}

	// Changed on disk after start: refused until a reload, never a body
	// the catalog's fingerprint (and so trust) does not cover.
	writeTree(t, root, map[string]string{"deploy/SKILL.md": skillMD("deploy", "Ship it.", "Something else entirely.\n")})
	if _, err := s.ReadBody(); !errors.Is(err, ErrChanged) {
		t.Errorf("changed file: err %v, want ErrChanged", err)
	}
	if _, err := SkillFileChunk(s, 0); !errors.Is(err, ErrChanged) {
		t.Errorf("changed file, chunk: err %v, want ErrChanged", err)
	}
	if inj := InjectionText(s); !strings.Contains(inj, "could not be read") || strings.Contains(inj, "Something else") {
		t.Errorf("injection of a changed file:\n%s", inj)
	}
	c2, err := Load(Layers{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, mustGet(t, c2, "deploy")); got != "Something else entirely.\n" {
		t.Errorf("after a reload: %q", got)
	}

	// The fence holds for the late read: a SKILL.md swapped for a symlink
	// to a file outside is refused, not followed.
	outside := filepath.Join(t.TempDir(), "SKILL.md")
	if err := os.WriteFile(outside, []byte(skillMD("deploy", "Ship it.", "Something else entirely.\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "deploy", "SKILL.md")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	symlinkOrSkip(t, outside, p)
	if _, err := mustGet(t, c2, "deploy").ReadBody(); !errors.Is(err, ErrPathEscape) {
		t.Errorf("symlinked SKILL.md: err %v, want ErrPathEscape", err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := mustGet(t, c2, "deploy").ReadBody(); !errors.Is(err, ErrNotFound) {
		t.Errorf("removed SKILL.md: err %v, want ErrNotFound", err)
	}
}
