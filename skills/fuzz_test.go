package skills

import (
	"path/filepath"
	"strings"
	"testing"
)

func FuzzParseFrontmatter(f *testing.F) {
	for _, seed := range []string{
		"---\nname: demo\ndescription: d\n---\nbody",
		"\ufeff---\r\nname: demo\r\ndescription: |\r\n  x\r\n---\r\n",
		"---\nname: demo\ndescription: Use when: x\n  more: y\n---\n",
		"---\nname: Bad Name\ndescription: >-\n  folded\n---\n",
		"---\nmetadata:\n\tk: v\ndescription: d\n---\n",
		"---\na: &x [1, 2]\nb: *x\ndescription: *x\n---\n",
		"---\n- list\n---\n",
		"---\nname: 中文\ndescription: 描述\ntags: [联网]\n---\n",
		"---\n---\n",
		"---",
		"",
	} {
		f.Add([]byte(seed), "demo")
	}
	f.Add([]byte("---\ndescription: d\n---\n"), "../..")
	f.Fuzz(func(t *testing.T, data []byte, folder string) {
		path := "/skills/" + folder + "/SKILL.md"
		for _, strict := range []bool{false, true} {
			s, ws, err := analyze(path, data, strict)
			if err != nil {
				if len(ws) == 0 {
					t.Fatal("skip without a warning")
				}
				continue
			}
			if !ValidName(s.Name) || strings.ContainsAny(s.Name, "/ .") {
				t.Fatalf("invalid identity %q", s.Name)
			}
			if s.Description == "" {
				t.Fatal("empty description accepted")
			}
			if name, ok := ParseInjection(InjectionText(s)); !ok || name != s.Name {
				t.Fatalf("injection round trip: %q %v", name, ok)
			}
		}
	})
}

func FuzzFence(f *testing.F) {
	home, outside := f.TempDir(), f.TempDir()
	root := BuiltinCacheDir(home)
	dir := filepath.Join(root, "web-access")
	writeTree(f, dir, map[string]string{
		"SKILL.md":                 "---\nname: web-access\ndescription: d\n---\nbody\n",
		"references/a.md":          "A\n",
		"references/sub/b.md":      "B\n",
		"scripts/run.sh":           "#!/bin/sh\n",
		"references/sub/deep/c.md": "C\n",
	})
	writeTree(f, SupplementDir(home, "web-access"), map[string]string{"a.md": "user A\n"})
	writeTree(f, outside, map[string]string{"secret.md": "SECRET\n"})
	symlinkOrSkip(f, outside, filepath.Join(dir, "references", "link"))
	s := &Skill{Name: "web-access", Source: SourceBuiltin, Root: root, Dir: dir, Body: "body\n"}
	supplement := SupplementDir(home, "web-access")
	for _, seed := range []string{
		"", ".", "SKILL.md", "references/a.md", "references/sub/", "../x", "a/../../x", "/etc/passwd",
		"%2e%2e/x", "refs%2f..", "..\\x", "references/link/secret.md", "references/./sub//b.md",
		"references/%2E%2e/%2e%2E/secret.md", "~/x", "references/x.md",
	} {
		f.Add(seed)
	}
	inside := func(base, p string) bool {
		rel, err := filepath.Rel(base, p)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
	}
	f.Fuzz(func(t *testing.T, rel string) {
		if parts, err := cleanRel(rel); err == nil {
			joined := filepath.Join(append([]string{dir}, parts...)...)
			if !inside(dir, joined) {
				t.Fatalf("accepted %q resolves outside the skill folder: %s", rel, joined)
			}
		}
		if out, err := ReadFile(s, home, rel, 0); err == nil && strings.Contains(out, "SECRET") {
			t.Fatalf("read %q reached outside content", rel)
		}
		if _, p, err := NewWriter(home).Save("web-access", rel, "fuzz", false); err == nil && !inside(supplement, p) {
			t.Fatalf("write %q landed outside the supplement: %s", rel, p)
		}
	})
}
