package skills

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestLint(t *testing.T) {
	tests := []struct {
		name   string
		folder string
		data   string
		want   []string // substrings, one per expected warning, in order
		lines  []int
	}{
		{name: "clean", folder: "good", data: "---\nname: good\ndescription: Does good things. Use when asked.\nversion: \"1.0\"\ntags: [a, b]\nmetadata:\n  k: \"v\"\nallowed-tools: Read\ndisable-model-invocation: false\n---\nbody\n"},
		{name: "invalid name", folder: "good", data: "---\nname: Good_Name\ndescription: d\n---\n", want: []string{"not valid"}, lines: []int{2}},
		{name: "name differs from folder", folder: "folder", data: "---\nname: other\ndescription: d\n---\n", want: []string{"differs from its folder"}, lines: []int{2}},
		{name: "missing name", folder: "good", data: "---\ndescription: d\n---\n", want: []string{"no name"}, lines: []int{1}},
		{name: "missing description", folder: "good", data: "---\nname: good\n---\n", want: []string{"missing description"}},
		{name: "empty description", folder: "good", data: "---\nname: good\ndescription: \"\"\n---\n", want: []string{"missing description"}},
		{name: "long description", folder: "good", data: "---\nname: good\ndescription: " + strings.Repeat("x", 1025) + "\n---\n", want: []string{"over the spec limit of 1024"}, lines: []int{3}},
		{name: "long compatibility", folder: "good", data: "---\nname: good\ndescription: d\ncompatibility: " + strings.Repeat("x", 501) + "\n---\n", want: []string{"over the spec limit of 500"}, lines: []int{4}},
		{name: "unknown keys", folder: "good", data: "---\nname: good\ndescription: d\nfoo: 1\nTags: [x]\n---\n", want: []string{`unknown frontmatter key "foo"`, `unknown frontmatter key "Tags"`}, lines: []int{4, 5}},
		{name: "non-string metadata", folder: "good", data: "---\nname: good\ndescription: d\nmetadata:\n  version: 1.0\n  date: 2024-01-01\n  list: [a]\n  s: text\n---\n", want: []string{"metadata.version", "metadata.date", "metadata.list"}, lines: []int{5, 6, 7}},
		{name: "retry needed", folder: "good", data: "---\nname: good\ndescription: Use when: asked\n---\n", want: []string{"only parsed after"}, lines: []int{3}},
		{name: "wrong shapes", folder: "good", data: "---\nname: good\ndescription: d\nversion: 2\nauthor: [a]\ntags: solo\ndisable-model-invocation: \"yes\"\n---\n", want: []string{"version: value 2 is a YAML int", "author: expected a string", "tags: expected a list", "expected true or false"}, lines: []int{4, 5, 6, 7}},
		{name: "not utf8", folder: "good", data: "---\nname: good\ndescription: ok\nauthor: \xff\n---\n", want: []string{"UTF-8"}, lines: []int{4}},
		{name: "oversize", folder: "good", data: "---\nname: good\ndescription: d\n---\n" + strings.Repeat("x", MaxSkillFileBytes), want: []string{"over the"}},
		{name: "no frontmatter", folder: "good", data: "# Title\n", want: []string{"frontmatter"}, lines: []int{1}},
		{name: "broken yaml", folder: "good", data: "---\nname: good\ndescription: [x\n---\n", want: []string{"invalid frontmatter YAML"}},
		{name: "underscore name", folder: "my_skill", data: "---\nname: my_skill\ndescription: d\n---\n", want: []string{`loaded as "my-skill"`}, lines: []int{2}},
		{name: "leading hyphen", folder: "x", data: "---\nname: -x\ndescription: d\n---\n", want: []string{`loaded as "x"`}, lines: []int{2}},
		{name: "blank line before frontmatter", folder: "good", data: "\n---\nname: good\ndescription: d\n---\n", want: []string{"blank line(s) before the opening ---"}, lines: []int{1}},
		{name: "duplicate key", folder: "good", data: "---\nname: good\ndescription: a\ndescription: b\n---\n", want: []string{"duplicate key"}, lines: []int{4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, map[string]string{tc.folder + "/SKILL.md": tc.data})
			got := Lint(root)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d warnings, want %d: %v", len(got), len(tc.want), got)
			}
			for i, w := range got {
				if !strings.Contains(w.Msg, tc.want[i]) {
					t.Errorf("warning %d = %q, want %q", i, w.Msg, tc.want[i])
				}
				if i < len(tc.lines) && w.Line != tc.lines[i] {
					t.Errorf("warning %d at line %d, want %d", i, w.Line, tc.lines[i])
				}
				if w.File != filepath.Join(root, tc.folder, "SKILL.md") {
					t.Errorf("file %q", w.File)
				}
			}
		})
	}
}

func TestLintTree(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"a/SKILL.md":              skillMD("a", "A.", ""),
		"b/SKILL.md":              skillMD("a", "Dup.", ""),
		"node_modules/x/SKILL.md": "garbage",
		".hidden/x/SKILL.md":      "garbage",
	})
	got := Lint(root)
	if len(got) != 2 || !hasWarning(got, "duplicate skill name") || !hasWarning(got, "differs from its folder") {
		t.Errorf("got %v", got)
	}
	if got := Lint(filepath.Join(root, "missing")); len(got) != 1 {
		t.Errorf("missing root: %v", got)
	}
	// A skill folder itself can be linted.
	if got := Lint(filepath.Join(root, "a")); len(got) != 0 {
		t.Errorf("single skill: %v", got)
	}
}

func TestLintSkillFileAndMisnamedFiles(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"good/SKILL.md":  skillMD("good", "Good.", ""),
		"bad/SKILL.md":   "---\nname: bad\ndescription: d\nfoo: 1\n---\n",
		"lower/skill.md": skillMD("lower", "Lower.", ""),
	})
	if got := Lint(filepath.Join(root, "good", "SKILL.md")); len(got) != 0 {
		t.Errorf("a clean SKILL.md path: %v", got)
	}
	if got := Lint(filepath.Join(root, "bad", "SKILL.md")); len(got) != 1 || got[0].Line != 4 {
		t.Errorf("a SKILL.md path with an unknown key: %v", got)
	}
	got := Lint(filepath.Join(root, "lower", "skill.md"))
	if !hasWarning(got, "must be named SKILL.md") {
		t.Errorf("a lowercase skill.md path: %v", got)
	}
	// Scanning a tree reports the lowercase file instead of skipping it.
	if got := Lint(root); !hasWarning(got, "must be named SKILL.md (in capitals), not skill.md") {
		t.Errorf("tree with a lowercase skill.md: %v", got)
	}
}
