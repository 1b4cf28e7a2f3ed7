package skills

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
)

// builtinFS is a fake embedded FS with one builtin skill.
func builtinFS(version, body string) fstest.MapFS {
	return fstest.MapFS{
		"web-access/SKILL.md":                               {Data: []byte("---\nname: web-access\ndescription: Builtin web access.\nversion: \"" + version + "\"\n---\n" + body)},
		"web-access/references/site-patterns/github.com.md": {Data: []byte("# github\n")},
		"web-access/scripts/run.sh":                         {Data: []byte("#!/bin/sh\n")},
		"not-a-skill/README.md":                             {Data: []byte("no SKILL.md here")},
	}
}

func TestLoadLayers(t *testing.T) {
	tests := []struct {
		name  string
		home  map[string]string // under $Home/skills
		ws    map[string]string // under $Workspace/.parley/skills
		check func(t *testing.T, c *Catalog)
	}{
		{
			name: "builtin only",
			check: func(t *testing.T, c *Catalog) {
				s := mustGet(t, c, "web-access")
				if s.Source != SourceBuiltin || s.Replaced != "" {
					t.Errorf("source %q replaced %q", s.Source, s.Replaced)
				}
				if !strings.HasSuffix(s.Dir, filepath.Join("skills-cache", "web-access")) {
					t.Errorf("dir %q", s.Dir)
				}
				if c.Len() != 1 {
					t.Errorf("len %d", c.Len())
				}
			},
		},
		{
			name: "user replaces builtin",
			home: map[string]string{"web-access/SKILL.md": skillMD("web-access", "User version.", "user body\n")},
			check: func(t *testing.T, c *Catalog) {
				s := mustGet(t, c, "web-access")
				if s.Source != SourceUser || s.Replaced != SourceBuiltin || s.Description != "User version." {
					t.Errorf("got %+v", s)
				}
			},
		},
		{
			name: "workspace replaces user which replaced builtin",
			home: map[string]string{"web-access/SKILL.md": skillMD("web-access", "User.", "")},
			ws:   map[string]string{"web-access/SKILL.md": skillMD("web-access", "Workspace.", "")},
			check: func(t *testing.T, c *Catalog) {
				s := mustGet(t, c, "web-access")
				if s.Source != SourceWorkspace || s.Replaced != SourceUser || s.Description != "Workspace." {
					t.Errorf("got %+v", s)
				}
				if s.Version != "" {
					t.Errorf("fields merged from a lower layer: version %q", s.Version)
				}
			},
		},
		{
			name: "references-only user folder does not shadow builtin",
			home: map[string]string{"web-access/references/notes.md": "# notes\n"},
			check: func(t *testing.T, c *Catalog) {
				if s := mustGet(t, c, "web-access"); s.Source != SourceBuiltin {
					t.Errorf("source %q", s.Source)
				}
			},
		},
		{
			name: "identity from frontmatter name replaces across folders",
			home: map[string]string{"my-web/SKILL.md": skillMD("web-access", "Renamed folder.", "")},
			check: func(t *testing.T, c *Catalog) {
				if s := mustGet(t, c, "web-access"); s.Source != SourceUser || !strings.HasSuffix(s.Dir, "my-web") {
					t.Errorf("got %+v", s)
				}
			},
		},
		{
			name: "nested, depth limit, skipped folders",
			home: map[string]string{
				"team/ops/deploy/SKILL.md":      skillMD("deploy", "Deploy.", ""),
				"a/b/c/depth-four/SKILL.md":     skillMD("depth-four", "Four.", ""),
				"a/b/c/d/depth-five/SKILL.md":   skillMD("depth-five", "Five.", ""),
				".hidden/secret/SKILL.md":       skillMD("secret", "Hidden.", ""),
				"node_modules/pkg/SKILL.md":     skillMD("pkg", "Module.", ""),
				"x/.git/hooks/SKILL.md":         skillMD("hooks", "Git.", ""),
				"outer/SKILL.md":                skillMD("outer", "Outer.", ""),
				"outer/references/in/SKILL.md":  skillMD("inner", "Inner.", ""),
				"empty-folder/references/a.md":  "x",
				"broken/SKILL.md":               "---\nname: broken\n---\n",
				"after-broken/SKILL.md":         skillMD("after-broken", "Still loads.", ""),
				"bad-utf8/SKILL.md":             "---\nname: bad-utf8\ndescription: \xc3\x28\n---\n",
				"Caps Folder/SKILL.md":          skillMD("Caps", "Bad.", ""),
				"good-folder/SKILL.md":          "---\nname: Has Spaces\ndescription: Fallback.\n---\n",
				"dup-one/SKILL.md":              skillMD("dup", "First.", ""),
				"dup-two/SKILL.md":              skillMD("dup", "Second.", ""),
				"huge/SKILL.md":                 skillMD("huge", "Huge.", strings.Repeat("x\n", MaxSkillFileBytes)),
				"crlf-bom/SKILL.md":             "\ufeff---\r\nname: crlf-bom\r\ndescription: Windows.\r\n---\r\n",
				"deep/SKILL.md/not-a-file/x.md": "a folder named SKILL.md is not a skill file",
			},
			check: func(t *testing.T, c *Catalog) {
				for _, n := range []string{"deploy", "depth-four", "outer", "after-broken", "good-folder", "dup", "crlf-bom"} {
					mustGet(t, c, n)
				}
				for _, n := range []string{"depth-five", "secret", "pkg", "hooks", "inner", "broken", "bad-utf8", "caps", "huge", "has-spaces"} {
					if _, ok := c.Get(n); ok {
						t.Errorf("%s should not load", n)
					}
				}
				if s := mustGet(t, c, "dup"); s.Description != "First." {
					t.Errorf("in-layer duplicate: got %q", s.Description)
				}
				ws := c.Warnings()
				for _, want := range []string{"missing description", "not valid UTF-8", "already used", "over the", "neither name"} {
					if !hasWarning(ws, want) {
						t.Errorf("no warning containing %q in %v", want, ws)
					}
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			home, ws := t.TempDir(), t.TempDir()
			writeTree(t, UserSkillsDir(home), tc.home)
			writeTree(t, WorkspaceSkillsDir(ws), tc.ws)
			c, err := Load(Layers{Builtin: builtinFS("1.0.0", "body\n"), Home: home, Workspace: ws})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
			all := c.All()
			for i := 1; i < len(all); i++ {
				if all[i-1].Name >= all[i].Name {
					t.Errorf("All not sorted: %s >= %s", all[i-1].Name, all[i].Name)
				}
			}
		})
	}
}

func mustGet(t *testing.T, c *Catalog, name string) *Skill {
	t.Helper()
	s, ok := c.Get(name)
	if !ok {
		t.Fatalf("skill %q not loaded; warnings: %v", name, c.Warnings())
	}
	return s
}

func TestLoadSymlinksIgnored(t *testing.T) {
	home, elsewhere := t.TempDir(), t.TempDir()
	writeTree(t, elsewhere, map[string]string{
		"linked/SKILL.md": skillMD("linked", "Via symlink.", ""),
		"target.md":       skillMD("filelink", "Via file symlink.", ""),
	})
	root := UserSkillsDir(home)
	writeTree(t, root, map[string]string{"real/SKILL.md": skillMD("real", "Real.", "")})
	symlinkOrSkip(t, filepath.Join(elsewhere, "linked"), filepath.Join(root, "linked"))
	if err := os.MkdirAll(filepath.Join(root, "filelink"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlinkOrSkip(t, filepath.Join(elsewhere, "target.md"), filepath.Join(root, "filelink", "SKILL.md"))

	c, err := Load(Layers{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	mustGet(t, c, "real")
	for _, n := range []string{"linked", "filelink"} {
		if _, ok := c.Get(n); ok {
			t.Errorf("%s loaded through a symlink", n)
		}
	}
	if !hasWarning(c.Warnings(), "symlinked folder leads outside the skills folder") || !hasWarning(c.Warnings(), "not a regular file") {
		t.Errorf("warnings %v", c.Warnings())
	}
}

func TestLoadSymlinkedLayerRootAllowed(t *testing.T) {
	home, dotfiles := t.TempDir(), t.TempDir()
	writeTree(t, dotfiles, map[string]string{"mine/SKILL.md": skillMD("mine", "Mine.", "")})
	symlinkOrSkip(t, dotfiles, UserSkillsDir(home))
	c, err := Load(Layers{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	mustGet(t, c, "mine")
}

func TestLoadErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain-file")
	writeTree(t, filepath.Dir(file), map[string]string{"plain-file": "x"})
	tests := []struct {
		name string
		l    Layers
	}{
		{"builtin without home", Layers{Builtin: builtinFS("1", "")}},
		{"cache under a file", Layers{Builtin: builtinFS("1", ""), Home: file}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Load(tc.l); err == nil {
				t.Error("want error")
			}
		})
	}
}

func TestLoadEmpty(t *testing.T) {
	c, err := Load(Layers{Home: t.TempDir(), Workspace: t.TempDir()})
	if err != nil || c.Len() != 0 || len(c.Warnings()) != 0 {
		t.Fatalf("c=%v err=%v warnings=%v", c, err, c.Warnings())
	}
}

func TestRegistryReload(t *testing.T) {
	home := t.TempDir()
	root := UserSkillsDir(home)
	writeTree(t, root, map[string]string{"one/SKILL.md": skillMD("one", "One.", "")})
	r, err := NewRegistry(Layers{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	first := r.Catalog()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Every snapshot is complete: one or two skills, never zero.
				if n := r.Catalog().Len(); n < 1 || n > 2 {
					t.Errorf("half-loaded catalog with %d skills", n)
					return
				}
			}
		}()
	}
	writeTree(t, root, map[string]string{"two/SKILL.md": skillMD("two", "Two.", "")})
	for range 10 {
		if _, err := r.Reload(); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
	if first.Len() != 1 {
		t.Errorf("old snapshot changed: %d", first.Len())
	}
	if r.Catalog().Len() != 2 {
		t.Errorf("reload not published: %d", r.Catalog().Len())
	}
}

// Slips that used to lose a skill without a word: a lowercase skill.md is
// reported; an underscore or a leading hyphen in the name is normalised.
func TestLoadReportsMisnamedFilesAndNormalisesNames(t *testing.T) {
	home := t.TempDir()
	writeTree(t, UserSkillsDir(home), map[string]string{
		"lower/skill.md":       skillMD("lower", "Lower.", ""),
		"my_tool/SKILL.md":     skillMD("my_tool", "Tool.", ""),
		"draft/SKILL.md":       skillMD("-draft", "Draft.", ""),
		"blank-first/SKILL.md": "\n" + skillMD("blank-first", "Blank.", ""),
	})
	c, err := Load(Layers{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"my-tool", "draft", "blank-first"} {
		if _, ok := c.Get(name); !ok {
			t.Errorf("%s not loaded; warnings %v", name, c.Warnings())
		}
	}
	if _, ok := c.Get("lower"); ok || !hasWarning(c.Warnings(), "must be named SKILL.md") {
		t.Errorf("lowercase skill.md: loaded=%v warnings %v", ok, c.Warnings())
	}
	if n := len(c.Warnings()); n != 4 {
		t.Errorf("%d warnings, want one per slip: %v", n, c.Warnings())
	}
}
