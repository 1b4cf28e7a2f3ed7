package skills

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Lint checks every SKILL.md under root (found with the loader's scan rules;
// root may itself be a skill folder or a SKILL.md file) strictly against the Agent Skills spec
// plus Parley's fields, and returns one warning per departure, sorted by
// file and line: invalid name, name differing from its folder, missing or
// empty description, description over 1024 or compatibility over 500
// characters, unknown keys, non-string metadata values, YAML that only
// parses after the lenient retry, wrongly shaped fields, non-UTF-8 and
// oversized files, and duplicate names. An empty result means clean.
func Lint(root string) []Warning {
	root, err := filepath.Abs(root)
	if err != nil {
		return []Warning{{File: root, Msg: fmt.Sprintf("cannot resolve path: %v", err)}}
	}
	fi, err := os.Stat(root)
	if err != nil {
		// Unlike a missing layer, a missing lint target is a mistake.
		return []Warning{{File: root, Msg: fmt.Sprintf("cannot lint: %v", cleanPathErr(err))}}
	}
	var paths []string
	var warns []Warning
	if fi.IsDir() {
		paths, warns = scanRoot(root, true)
	} else {
		// A file named on the command line is linted as a SKILL.md, so an
		// editor or a pre-commit hook can pass the file it has.
		paths = []string{root}
		if base := filepath.Base(root); base != skillFileName {
			warns = append(warns, Warning{File: root, Msg: fmt.Sprintf("the file must be named %s; the loader skips %s", skillFileName, base)})
		}
	}
	names := map[string]string{}
	for _, p := range paths {
		data, err := readSkillFile(p)
		if err != nil {
			warns = append(warns, Warning{File: p, Msg: err.Error()})
			continue
		}
		s, w, err := analyze(p, data, true)
		warns = append(warns, w...)
		if err != nil {
			continue
		}
		if first, dup := names[s.Name]; dup {
			warns = append(warns, Warning{File: p, Line: 1, Msg: fmt.Sprintf("duplicate skill name %q (also %s)", s.Name, first)})
			continue
		}
		names[s.Name] = p
	}
	slices.SortStableFunc(warns, func(a, b Warning) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
	return warns
}
