package skills

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestSaveReference(t *testing.T) {
	tests := []struct {
		name      string
		skill     string
		file      string
		content   string
		overwrite bool
		prepare   func(t *testing.T, home string)
		want      error
		wantFile  string // expected content of the file afterwards
	}{
		{name: "append creates folders", skill: "web-access", file: "references/site-patterns/example.com.md", content: "## Trap\n- one", wantFile: "## Trap\n- one\n"},
		{name: "append adds to existing", skill: "web-access", file: "references/notes.md", content: "second\n",
			prepare: func(t *testing.T, home string) {
				writeTree(t, SupplementDir(home, "web-access"), map[string]string{"notes.md": "first\n"})
			},
			wantFile: "first\nsecond\n"},
		{name: "overwrite replaces", skill: "web-access", file: "references/notes.md", content: "fresh", overwrite: true,
			prepare: func(t *testing.T, home string) {
				writeTree(t, SupplementDir(home, "web-access"), map[string]string{"notes.md": "old\n"})
			},
			wantFile: "fresh\n"},
		{name: "upper-case extension", skill: "web-access", file: "references/NOTES.MD", content: "x", wantFile: "x\n"},
		{name: "SKILL.md refused", skill: "web-access", file: "references/SKILL.md", content: "x", want: ErrNotAllowed},
		{name: "skill.md any case refused", skill: "web-access", file: "references/sub/Skill.MD", content: "x", want: ErrNotAllowed},
		{name: "top-level SKILL.md refused", skill: "web-access", file: "SKILL.md", content: "x", want: ErrPathEscape},
		{name: "non-md refused", skill: "web-access", file: "references/run.sh", content: "x", want: ErrNotAllowed},
		{name: "no extension refused", skill: "web-access", file: "references/notes", content: "x", want: ErrNotAllowed},
		{name: "hidden refused", skill: "web-access", file: "references/.hidden.md", content: "x", want: ErrNotAllowed},
		{name: "outside references", skill: "web-access", file: "scripts/x.md", content: "x", want: ErrPathEscape},
		{name: "references folder itself", skill: "web-access", file: "references", content: "x", want: ErrPathEscape},
		{name: "dot-dot", skill: "web-access", file: "references/../../x.md", content: "x", want: ErrPathEscape},
		{name: "nested dot-dot", skill: "web-access", file: "references/a/../../x.md", content: "x", want: ErrPathEscape},
		{name: "absolute", skill: "web-access", file: "/tmp/x.md", content: "x", want: ErrPathEscape},
		{name: "encoded dots", skill: "web-access", file: "references/%2e%2e/x.md", content: "x", want: ErrPathEscape},
		{name: "encoded slash", skill: "web-access", file: "references%2f..%2fx.md", content: "x", want: ErrPathEscape},
		{name: "backslash", skill: "web-access", file: "references\\x.md", content: "x", want: ErrPathEscape},
		{name: "invalid skill name", skill: "../web", file: "references/x.md", content: "x", want: ErrInvalidName},
		{name: "capital skill name", skill: "Web", file: "references/x.md", content: "x", want: ErrInvalidName},
		{name: "empty content", skill: "web-access", file: "references/x.md", content: " \n", want: ErrNotAllowed},
		{name: "8000 characters allowed", skill: "web-access", file: "references/x.md", content: strings.Repeat("汉", 7999), wantFile: strings.Repeat("汉", 7999) + "\n"},
		{name: "over 8000 characters", skill: "web-access", file: "references/x.md", content: strings.Repeat("a", 8001), want: ErrTooLarge},
		{name: "file would exceed 64 KiB", skill: "web-access", file: "references/x.md", content: strings.Repeat("a", 100),
			prepare: func(t *testing.T, home string) {
				writeTree(t, SupplementDir(home, "web-access"), map[string]string{"x.md": strings.Repeat("b", MaxReferenceFileBytes-50)})
			},
			want: ErrTooLarge},
		{name: "overwrite ignores old size", skill: "web-access", file: "references/x.md", content: "small", overwrite: true,
			prepare: func(t *testing.T, home string) {
				writeTree(t, SupplementDir(home, "web-access"), map[string]string{"x.md": strings.Repeat("b", MaxReferenceFileBytes)})
			},
			wantFile: "small\n"},
		{name: "symlinked references folder", skill: "web-access", file: "references/x.md", content: "x",
			prepare: func(t *testing.T, home string) {
				_ = os.MkdirAll(filepath.Join(UserSkillsDir(home), "web-access"), 0o755)
				symlinkOrSkip(t, t.TempDir(), SupplementDir(home, "web-access"))
			},
			want: ErrPathEscape},
		{name: "symlinked skill folder", skill: "web-access", file: "references/x.md", content: "x",
			prepare: func(t *testing.T, home string) {
				_ = os.MkdirAll(UserSkillsDir(home), 0o755)
				symlinkOrSkip(t, t.TempDir(), filepath.Join(UserSkillsDir(home), "web-access"))
			},
			want: ErrPathEscape},
		{name: "symlinked skills root", skill: "web-access", file: "references/x.md", content: "x",
			prepare: func(t *testing.T, home string) { symlinkOrSkip(t, t.TempDir(), UserSkillsDir(home)) },
			want:    ErrPathEscape},
		{name: "symlinked subfolder", skill: "web-access", file: "references/sub/x.md", content: "x",
			prepare: func(t *testing.T, home string) {
				_ = os.MkdirAll(SupplementDir(home, "web-access"), 0o755)
				symlinkOrSkip(t, t.TempDir(), filepath.Join(SupplementDir(home, "web-access"), "sub"))
			},
			want: ErrPathEscape},
		{name: "symlinked file", skill: "web-access", file: "references/x.md", content: "x",
			prepare: func(t *testing.T, home string) {
				outside := filepath.Join(t.TempDir(), "target.md")
				writeTree(t, filepath.Dir(outside), map[string]string{"target.md": "keep\n"})
				_ = os.MkdirAll(SupplementDir(home, "web-access"), 0o755)
				symlinkOrSkip(t, outside, filepath.Join(SupplementDir(home, "web-access"), "x.md"))
			},
			want: ErrPathEscape},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if tc.prepare != nil {
				tc.prepare(t, home)
			}
			w := NewWriter(home)
			n, path, err := w.Save(tc.skill, tc.file, tc.content, tc.overwrite)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.want != nil {
				return
			}
			wantPath := filepath.Join(UserSkillsDir(home), tc.skill, filepath.FromSlash(tc.file))
			if path != wantPath {
				t.Errorf("path %q, want %q", path, wantPath)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != tc.wantFile {
				t.Errorf("file %q, want %q", trimForLog(string(data)), trimForLog(tc.wantFile))
			}
			if n != len(tc.content)+boolInt(!strings.HasSuffix(tc.content, "\n")) {
				t.Errorf("written %d", n)
			}
			entries, _ := os.ReadDir(filepath.Dir(path))
			for _, e := range entries {
				if strings.Contains(e.Name(), ".tmp-") {
					t.Errorf("temporary file left: %s", e.Name())
				}
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func trimForLog(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

func TestSaveReferenceNeverCreatesSkill(t *testing.T) {
	home := t.TempDir()
	if _, _, err := SaveReference(home, "web-access", "references/notes.md", "note", false); err != nil {
		t.Fatal(err)
	}
	c, err := Load(Layers{Builtin: builtinFS("1", "builtin body\n"), Home: home})
	if err != nil {
		t.Fatal(err)
	}
	if s := mustGet(t, c, "web-access"); s.Source != SourceBuiltin {
		t.Errorf("supplement shadowed builtin: %q", s.Source)
	}
}

func TestSaveReferenceConcurrentAppends(t *testing.T) {
	home := t.TempDir()
	w := NewWriter(home)
	const writers, each = 20, 10
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				line := fmt.Sprintf("writer %02d entry %02d %s", g, i, strings.Repeat("x", 100))
				if _, _, err := w.Save("web-access", "references/log.md", line, false); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	data, err := os.ReadFile(filepath.Join(SupplementDir(home, "web-access"), "log.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != writers*each {
		t.Fatalf("%d lines, want %d", len(lines), writers*each)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		var g, i int
		if _, err := fmt.Sscanf(l, "writer %02d entry %02d", &g, &i); err != nil || !strings.HasSuffix(l, strings.Repeat("x", 100)) {
			t.Fatalf("interleaved line %q", l)
		}
		seen[l[:21]] = true
	}
	if len(seen) != writers*each {
		t.Errorf("%d distinct entries", len(seen))
	}
}

// TestSaveReferenceCapsPerSkill: one skill's supplement folder holds at
// most the Writer's files and bytes, however the writes are spread over
// files; other skills have caps of their own, and an overwrite that
// shrinks a file is always possible.
func TestSaveReferenceCapsPerSkill(t *testing.T) {
	if MaxSkillReferenceFiles*MaxReferenceFileBytes <= MaxSkillReferenceBytes {
		t.Fatalf("the per-skill byte cap is not reachable below the file cap")
	}
	home := t.TempDir()
	w := NewWriter(home)
	w.maxFiles, w.maxBytes = 3, 2500
	note := strings.Repeat("x", 999) // 1000 bytes with the newline
	for i := range 2 {
		if _, _, err := w.Save("web-access", fmt.Sprintf("references/n%d.md", i), note, false); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
	}
	// Bytes: a third 1000-byte note would total 3000 > 2500, in a new
	// file or appended to an old one.
	for _, f := range []string{"references/n2.md", "references/n0.md"} {
		if _, _, err := w.Save("web-access", f, note, false); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "per skill") {
			t.Errorf("save %s past the byte cap = %v, want ErrTooLarge naming the per-skill limit", f, err)
		}
	}
	// An overwrite that shrinks is fine, and frees room.
	if _, _, err := w.Save("web-access", "references/n0.md", "short", true); err != nil {
		t.Fatalf("shrinking overwrite: %v", err)
	}
	if _, _, err := w.Save("web-access", "references/sub/n2.md", "third file", false); err != nil {
		t.Fatalf("third file: %v", err)
	}
	// Files: a fourth file is refused even though bytes are left.
	if _, _, err := w.Save("web-access", "references/n3.md", "fourth", false); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "3 reference files") {
		t.Errorf("fourth file = %v, want ErrTooLarge naming the file cap", err)
	}
	// Appending to an existing file is not a new file.
	if _, _, err := w.Save("web-access", "references/sub/n2.md", "more", false); err != nil {
		t.Errorf("append within the caps: %v", err)
	}
	// Another skill counts apart.
	if _, _, err := w.Save("other-skill", "references/n0.md", note, false); err != nil {
		t.Errorf("another skill: %v", err)
	}
	files, total, err := referenceUsage(mustRoot(t, home), "web-access")
	if err != nil || files != 3 || total > 2500 {
		t.Errorf("web-access holds %d files, %d bytes (%v); want 3 files within 2500 bytes", files, total, err)
	}
}

func mustRoot(t *testing.T, home string) *os.Root {
	t.Helper()
	root, err := openUserSkills(home)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}
