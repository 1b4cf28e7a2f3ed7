package skills

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// maxScanDepth bounds how far below a layer root a skill folder may sit
// (root/a/b/c/d/SKILL.md is the deepest), so a stray huge tree cannot stall
// start-up.
const maxScanDepth = 4

// skillFileName is the file that makes a folder a skill.
const skillFileName = "SKILL.md"

// scanRoot returns the SKILL.md files under root in lexical order. It skips
// dot-folders (including .git) and node_modules, follows a symlinked folder
// only when it resolves to a folder inside root (a Kubernetes ConfigMap
// volume presents each entry as a symlink into its hidden ..data/ folder),
// never one that leaves root, visits each real folder once, and stops
// descending below a skill folder and below maxScanDepth.
// When rootIsSkill is set, root itself may be a skill folder (Lint accepts a
// single skill); layer roots never are. A missing root yields nothing.
func scanRoot(root string, rootIsSkill bool) ([]string, []Warning) {
	sc := &scanner{seen: map[string]bool{}}
	if _, err := os.Stat(root); err != nil {
		if !os.IsNotExist(err) {
			sc.warn(root, fmt.Sprintf("cannot scan skills folder: %v", err))
		}
		return nil, sc.warns
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		sc.warn(root, fmt.Sprintf("cannot scan skills folder: %v", err))
		return nil, sc.warns
	}
	sc.realRoot = real
	sc.seen[real] = true
	sc.walk(root, real, 0, rootIsSkill)
	return sc.paths, sc.warns
}

type scanner struct {
	realRoot string          // root with its symlinks resolved
	seen     map[string]bool // real folders already walked
	paths    []string
	warns    []Warning
}

// enter reports whether the folder p (a symlink or a real folder) is to be
// walked, and its real path: it must resolve inside the root and not have
// been walked yet under another name. real is p's real path when p is a
// real folder (its parent's real path joined with its name), "" for a
// symlink, which is resolved here.
func (sc *scanner) enter(p, real string, link bool) (string, bool) {
	if link {
		var err error
		real, err = filepath.EvalSymlinks(p)
		if err != nil {
			sc.warn(p, "symlink that cannot be resolved; ignored")
			return "", false
		}
		if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
			return "", false // a symlinked file: not a skill folder
		}
		if !within(sc.realRoot, real) {
			sc.warn(p, "symlinked folder leads outside the skills folder; ignored")
			return "", false
		}
	}
	if sc.seen[real] {
		return "", false
	}
	sc.seen[real] = true
	return real, true
}

// within reports whether path is strictly below root (both resolved).
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func (sc *scanner) warn(file, msg string) {
	sc.warns = append(sc.warns, Warning{File: file, Msg: msg})
}

// walk scans dir, whose real path (symlinks resolved) is real: a real
// folder's real path is its parent's joined with its name, so only
// symlinks cost a resolution.
func (sc *scanner) walk(dir, real string, depth int, mayBeSkill bool) {
	entries, err := os.ReadDir(dir) // sorted by name: deterministic order
	if err != nil {
		sc.warn(dir, fmt.Sprintf("cannot read folder: %v", err))
		return
	}
	if mayBeSkill {
		variant := ""
		for _, e := range entries {
			if e.Name() != skillFileName {
				if strings.EqualFold(e.Name(), skillFileName) {
					variant = e.Name()
				}
				continue
			}
			p := filepath.Join(dir, e.Name())
			if !e.Type().IsRegular() {
				sc.warn(p, SkippedPrefix+"SKILL.md is not a regular file (symlink?)")
				return
			}
			sc.paths = append(sc.paths, p)
			return // a skill's own subfolders are its resources, not skills
		}
		if variant != "" {
			// Almost certainly meant as a skill: say why it is not one
			// rather than skip it without a word.
			sc.warn(filepath.Join(dir, variant), fmt.Sprintf(SkippedPrefix+"the file must be named %s (in capitals), not %s", skillFileName, variant))
			return
		}
	}
	if depth >= maxScanDepth {
		return
	}
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(dir, name)
		switch {
		case skipFolder(name):
		case e.Type()&os.ModeSymlink != 0:
			if r, ok := sc.enter(p, "", true); ok {
				sc.walk(p, r, depth+1, true)
			}
		case !e.IsDir():
		default:
			if r, ok := sc.enter(p, filepath.Join(real, name), false); ok {
				sc.walk(p, r, depth+1, true)
			}
		}
	}
}

// skipFolder lists folders that never hold skills but may be huge or hidden.
func skipFolder(name string) bool {
	return name == "" || name[0] == '.' || name == "node_modules"
}
