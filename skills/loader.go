package skills

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Layers names where skills come from, lowest precedence first.
type Layers struct {
	// Builtin holds one folder per builtin skill (production: builtin.FS).
	// It is extracted to Home/skills-cache/NAME/ so tools can read it.
	Builtin fs.FS
	// Home is $PARLEY_HOME; its skills/ folder is the user layer.
	Home string
	// Workspace is $PARLEY_WORKSPACE; its .parley/skills/ folder is the
	// workspace layer. Empty means no workspace layer.
	Workspace string
}

// UserSkillsDir is the user layer root under home.
func UserSkillsDir(home string) string { return filepath.Join(home, "skills") }

// WorkspaceSkillsDir is the workspace layer root under a workspace.
func WorkspaceSkillsDir(workspace string) string {
	return filepath.Join(workspace, ".parley", "skills")
}

// BuiltinCacheDir is where builtin skills are extracted under home.
func BuiltinCacheDir(home string) string { return filepath.Join(home, "skills-cache") }

// Catalog is an immutable snapshot of the loaded skills.
type Catalog struct {
	byName   map[string]*Skill
	sorted   []*Skill
	ranked   []*Skill        // index order (IndexRule); nil: by name
	builtin  map[string]bool // names the builtin layer has, replaced or not
	warnings []Warning
	entries  *indexEntries // shared by the copies WithOrder makes
}

// Load scans the layers and builds a catalog. Problems with single skills are
// warnings (Catalog.Warnings); the error is only for unrecoverable problems
// such as an unusable home or cache folder.
func Load(l Layers) (*Catalog, error) {
	c := &Catalog{byName: map[string]*Skill{}}
	home, err := absOrEmpty(l.Home)
	if err != nil {
		return nil, fmt.Errorf("skills home: %w", err)
	}
	workspace, err := absOrEmpty(l.Workspace)
	if err != nil {
		return nil, fmt.Errorf("skills workspace: %w", err)
	}
	if l.Builtin != nil {
		if home == "" {
			return nil, fmt.Errorf("builtin skills need a home folder to extract to")
		}
		cache := BuiltinCacheDir(home)
		dirs, warns, err := extractBuiltins(l.Builtin, cache)
		if err != nil {
			return nil, err
		}
		c.warnings = append(c.warnings, warns...)
		paths := make([]string, len(dirs))
		for i, d := range dirs {
			paths[i] = filepath.Join(d, skillFileName)
		}
		c.addLayer(SourceBuiltin, cache, paths)
	}
	if home != "" {
		root := UserSkillsDir(home)
		paths, warns := scanRoot(root, false)
		c.warnings = append(c.warnings, warns...)
		c.addLayer(SourceUser, root, paths)
	}
	if workspace != "" {
		root := WorkspaceSkillsDir(workspace)
		paths, warns := scanRoot(root, false)
		c.warnings = append(c.warnings, warns...)
		c.addLayer(SourceWorkspace, root, paths)
	}
	c.sorted = make([]*Skill, 0, len(c.byName))
	for _, s := range c.byName {
		c.sorted = append(c.sorted, s)
	}
	slices.SortFunc(c.sorted, func(a, b *Skill) int { return strings.Compare(a.Name, b.Name) })
	c.ranked = c.rank(IndexOrder{})
	c.entries = &indexEntries{m: map[*Skill]indexEntry{}}
	return c, nil
}

func absOrEmpty(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	return filepath.Abs(p)
}

// addLayer parses one layer's SKILL.md files. A later layer replaces the
// whole skill of the same name, never merging fields, so a replaced skill
// cannot point at another layer's files.
//
// Only the frontmatter stays in memory: the file passes through one buffer
// reused for the whole layer (its SHA-256 and UTF-8 check need every byte),
// and the body is left on disk for Skill.ReadBody, so a catalog of
// thousands of skills costs what their names and descriptions do.
func (c *Catalog) addLayer(src Source, root string, paths []string) {
	inLayer := map[string]string{}
	var buf bytes.Buffer
	for _, p := range paths {
		data, err := readSkillFileInto(&buf, p)
		if err != nil {
			c.warnings = append(c.warnings, Warning{File: p, Msg: SkippedPrefix + err.Error()})
			continue
		}
		s, warns, err := ParseSkillFile(p, data)
		c.warnings = append(c.warnings, warns...)
		if err != nil {
			continue
		}
		s.Body, s.onDisk = "", true
		if first, dup := inLayer[s.Name]; dup {
			c.warnings = append(c.warnings, Warning{File: p,
				Msg: fmt.Sprintf(SkippedPrefix+"name %q is already used by %s in the same layer", s.Name, first)})
			continue
		}
		inLayer[s.Name] = p
		s.Source, s.Root = src, root
		if src == SourceBuiltin {
			if c.builtin == nil {
				c.builtin = map[string]bool{}
			}
			c.builtin[s.Name] = true
		}
		if prev, ok := c.byName[s.Name]; ok {
			s.Replaced = prev.Source
		}
		c.byName[s.Name] = s
	}
}

// readSkillFile reads at most one byte over the limit so a huge file costs
// nothing and is still reported as too large.
func readSkillFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSkillFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return data, nil
}

// readSkillFileInto is readSkillFile reading into buf, whose memory the
// next call reuses: the bytes returned are only valid until then.
func readSkillFileInto(buf *bytes.Buffer, p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	buf.Reset()
	if fi, err := f.Stat(); err == nil && fi.Size() < MaxSkillFileBytes {
		buf.Grow(int(fi.Size()) + bytes.MinRead) // one read, and one to see EOF
	}
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxSkillFileBytes+1)); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return buf.Bytes(), nil
}

// Get returns the skill with the given identity.
func (c *Catalog) Get(name string) (*Skill, bool) {
	s, ok := c.byName[name]
	return s, ok
}

// All returns the skills sorted by name. The slice is a copy; the skills are
// shared and read-only.
func (c *Catalog) All() []*Skill { return slices.Clone(c.sorted) }

// Len returns the number of skills.
func (c *Catalog) Len() int { return len(c.sorted) }

// Warnings returns every problem found while loading, in scan order.
func (c *Catalog) Warnings() []Warning { return slices.Clone(c.warnings) }

// Skipped returns the warnings about skills that were not loaded at all.
func (c *Catalog) Skipped() []Warning {
	var out []Warning
	for _, w := range c.warnings {
		if w.Skipped() {
			out = append(out, w)
		}
	}
	return out
}
