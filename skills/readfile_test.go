package skills

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fenceFixture is a builtin skill with references plus a user supplement.
type fenceFixture struct {
	home, outside string
	skill         *Skill
}

func newFenceFixture(t *testing.T) fenceFixture {
	t.Helper()
	home, outside := t.TempDir(), t.TempDir()
	root := BuiltinCacheDir(home)
	dir := filepath.Join(root, "web-access")
	writeTree(t, dir, map[string]string{
		"SKILL.md":                               skillMD("web-access", "Web.", "body line\n"),
		".version":                               "1",
		"references/site-patterns/github.com.md": "# github\nbuiltin notes\n",
		"references/site-patterns/x.com.md":      "# x\n",
		"references/big.md":                      strings.Repeat("0123456789\n", 1000),
		"scripts/run.sh":                         "#!/bin/sh\n",
		"a%20b.md":                               "percent in a name is fine\n",
	})
	writeTree(t, SupplementDir(home, "web-access"), map[string]string{
		"site-patterns/github.com.md":  "user notes\n",
		"site-patterns/example.com.md": "only in supplement\n",
	})
	writeTree(t, outside, map[string]string{"secret.txt": "SECRET\n", "dir/secret.md": "SECRET\n"})
	return fenceFixture{home: home, outside: outside, skill: &Skill{
		Name: "web-access", Source: SourceBuiltin, Root: root, Dir: dir,
		Path: filepath.Join(dir, "SKILL.md"), Body: "body line\n",
	}}
}

func TestReadFile(t *testing.T) {
	fx := newFenceFixture(t)
	tests := []struct {
		rel  string
		want string // exact output
	}{
		{"", "SKILL.md\na%20b.md\nreferences/\nscripts/\n"},
		{".", "SKILL.md\na%20b.md\nreferences/\nscripts/\n"},
		{"SKILL.md", "body line\n"},
		{"./scripts/run.sh", "#!/bin/sh\n"},
		{"a%20b.md", "percent in a name is fine\n"},
		{"references/site-patterns", "github.com.md\nx.com.md\nexample.com.md (supplement)\ngithub.com.md (supplement)\n"},
		{"references/site-patterns/", "github.com.md\nx.com.md\nexample.com.md (supplement)\ngithub.com.md (supplement)\n"},
		{"references/site-patterns/github.com.md", "# github\nbuiltin notes\n\n----- user supplement ($PARLEY_HOME/skills/web-access/references/site-patterns/github.com.md) -----\nuser notes\n"},
		{"references/site-patterns/example.com.md", "only in supplement\n"},
		{"references/site-patterns/x.com.md", "# x\n"},
	}
	for _, tc := range tests {
		t.Run(tc.rel, func(t *testing.T) {
			got, err := ReadFile(fx.skill, fx.home, tc.rel, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestReadFileWithoutHomeSkipsSupplement(t *testing.T) {
	fx := newFenceFixture(t)
	got, err := ReadFile(fx.skill, "", "references/site-patterns/github.com.md", 0)
	if err != nil || strings.Contains(got, "user notes") {
		t.Fatalf("got %q err %v", got, err)
	}
}

func TestReadFileUserSkillNoSelfMerge(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(UserSkillsDir(home), "notes")
	writeTree(t, dir, map[string]string{"SKILL.md": skillMD("notes", "N.", ""), "references/a.md": "A\n"})
	s := &Skill{Name: "notes", Source: SourceUser, Root: UserSkillsDir(home), Dir: dir}
	got, err := ReadFile(s, home, "references", 0)
	if err != nil || got != "a.md\n" {
		t.Fatalf("got %q err %v", got, err)
	}
}

func TestReadFilePaging(t *testing.T) {
	fx := newFenceFixture(t)
	want := strings.Repeat("0123456789\n", 1000)
	var got string
	off := 0
	for i := 0; ; i++ {
		out, err := ReadFile(fx.skill, fx.home, "references/big.md", off)
		if err != nil {
			t.Fatal(err)
		}
		m := hintRe.FindStringSubmatch(out)
		if m == nil {
			got += out
			break
		}
		if m[2] != "references/big.md" {
			t.Fatalf("hint file %q", m[2])
		}
		chunk := strings.TrimSuffix(out, m[0])
		if len(chunk) > BodyChunkBytes || !strings.HasSuffix(chunk, "\n") {
			t.Fatalf("chunk %d: %d bytes", i, len(chunk))
		}
		got += chunk
		off = len(got)
	}
	if got != want {
		t.Error("pages do not reassemble the file")
	}
	if _, err := ReadFile(fx.skill, fx.home, "references/big.md", len(want)+1); !errors.Is(err, ErrBadOffset) {
		t.Errorf("past end: %v", err)
	}
}

func TestReadFileFence(t *testing.T) {
	fx := newFenceFixture(t)
	dir := fx.skill.Dir
	symlinkOrSkip(t, fx.outside, filepath.Join(dir, "references", "linkdir"))
	symlinkOrSkip(t, filepath.Join(fx.outside, "secret.txt"), filepath.Join(dir, "references", "link.md"))
	symlinkOrSkip(t, filepath.Join(fx.outside, "dir"), filepath.Join(SupplementDir(fx.home, "web-access"), "suplink"))
	tests := []struct {
		rel  string
		want error
	}{
		{"../x", ErrPathEscape},
		{"a/../../x", ErrPathEscape},
		{"references/../SKILL.md", ErrPathEscape},
		{"..", ErrPathEscape},
		{"/etc/passwd", ErrPathEscape},
		{fx.outside + "/secret.txt", ErrPathEscape},
		{"~/secret", ErrPathEscape},
		{"C:/x", ErrPathEscape},
		{"%2e%2e/x", ErrPathEscape},
		{"%2E%2E/secret.txt", ErrPathEscape},
		{"refs%2f..", ErrPathEscape},
		{"references%2F..%2F..%2Fx", ErrPathEscape},
		{"%252e%252e/x", ErrPathEscape},
		{"..\\x", ErrPathEscape},
		{"references\\x.md", ErrPathEscape},
		{"references/x\x00.md", ErrPathEscape},
		{"references/linkdir", ErrPathEscape},
		{"references/linkdir/secret.txt", ErrPathEscape},
		{"references/link.md", ErrPathEscape},
		{"references/suplink/secret.md", ErrPathEscape},
		{"references/missing.md", ErrNotFound},
		{"nope/deeper.md", ErrNotFound},
		{"SKILL.md/x", ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.rel, func(t *testing.T) {
			out, err := ReadFile(fx.skill, fx.home, tc.rel, 0)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v (out %q)", err, tc.want, out)
			}
			if strings.Contains(err.Error(), fx.outside) && !strings.Contains(tc.rel, fx.outside) {
				t.Errorf("error leaks a host path: %v", err)
			}
		})
	}
}

func TestReadFileSkillDirBehindSymlink(t *testing.T) {
	fx := newFenceFixture(t)
	// Swap the skill folder for a symlink after loading.
	moved := filepath.Join(fx.outside, "moved")
	if err := os.Rename(fx.skill.Dir, moved); err != nil {
		t.Fatal(err)
	}
	symlinkOrSkip(t, moved, fx.skill.Dir)
	if _, err := ReadFile(fx.skill, fx.home, "scripts/run.sh", 0); !errors.Is(err, ErrPathEscape) {
		t.Fatalf("err = %v", err)
	}
}

func TestReadFileRefusesNonText(t *testing.T) {
	fx := newFenceFixture(t)
	writeTree(t, fx.skill.Dir, map[string]string{"assets/logo.bin": "\xff\xfe\x00"})
	if _, err := ReadFile(fx.skill, fx.home, "assets/logo.bin", 0); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("err = %v", err)
	}
}
