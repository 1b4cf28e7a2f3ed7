package skills

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"unicode/utf8"
)

// ParseSkillFile parses the SKILL.md at path (an absolute path; its folder
// name is the fallback identity) from data. It fills every Skill field it can
// derive from the file — Name, Description, Dir, Path, Body, BodyLine, the
// optional fields, SHA256 and Warnings — leaving Source, Root and Replaced to
// the loader.
//
// A non-nil error means the skill must be skipped; the returned warnings then
// end with one describing why. Otherwise the warnings (also in
// Skill.Warnings) name fields that were dropped for having the wrong shape.
func ParseSkillFile(path string, data []byte) (*Skill, []Warning, error) {
	return analyze(path, data, false)
}

// analyze is ParseSkillFile with a strict switch used by Lint.
func analyze(path string, data []byte, strict bool) (*Skill, []Warning, error) {
	var warns []Warning
	fail := func(line int, err error) (*Skill, []Warning, error) {
		warns = append(warns, Warning{File: path, Line: line, Msg: SkippedPrefix + err.Error()})
		return nil, warns, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxSkillFileBytes {
		return fail(0, fmt.Errorf("file is %d bytes, over the %d-byte limit: %w", len(data), MaxSkillFileBytes, ErrTooLarge))
	}
	if !utf8.Valid(data) {
		return fail(firstInvalidLine(data), ErrNotUTF8)
	}
	fm, line, err := parseFrontmatter(normalise(data))
	if err != nil {
		return fail(line, err)
	}
	if fm.leadingBlank > 0 {
		warns = append(warns, Warning{File: path, Line: 1,
			Msg: fmt.Sprintf("%d blank line(s) before the opening ---; the file must start with ---, and other tools skip it: remove them", fm.leadingBlank)})
	}
	for _, l := range fm.fixed {
		warns = append(warns, Warning{File: path, Line: l,
			Msg: `frontmatter is not valid YAML and only parsed after quoting a value containing ": " or replacing tab indentation; quote the value and indent with spaces`})
	}
	sum := sha256.Sum256(data)
	s := &Skill{
		Dir:      filepath.Dir(path),
		Path:     path,
		Body:     fm.body,
		BodyLine: fm.bodyLine,
		bodyOff:  fm.bodyOff,
		bodyLen:  len(fm.body),
		SHA256:   hex.EncodeToString(sum[:]),
	}
	d := &decoder{file: path, lineOff: fm.lineOff, strict: strict}
	raw := d.decode(fm.mapping, s)
	warns = append(warns, d.warns...)

	folder := filepath.Base(s.Dir)
	switch {
	case ValidName(raw.value):
		s.Name = raw.value
		if strict && raw.value != folder {
			d := &decoder{file: path, lineOff: fm.lineOff}
			d.warnf(raw.node, "name %q differs from its folder name %q", raw.value, folder)
			warns = append(warns, d.warns...)
		}
	case ValidName(normaliseName(raw.value)):
		s.Name = normaliseName(raw.value)
		warns = append(warns, Warning{File: path, Line: raw.node.Line + fm.lineOff,
			Msg: fmt.Sprintf("name %q is not valid (1-64 of a-z, 0-9 and single hyphens, no leading hyphen); loaded as %q", raw.value, s.Name)})
	case ValidName(folder):
		s.Name = folder
		w := Warning{File: path, Line: 1, Msg: fmt.Sprintf("frontmatter has no name; using the folder name %q", folder)}
		if raw.value != "" {
			w.Line = raw.node.Line + fm.lineOff
			w.Msg = fmt.Sprintf("name %q is not valid (1-64 of a-z, 0-9 and single hyphens); using the folder name %q", raw.value, folder)
		}
		warns = append(warns, w)
	case ValidName(normaliseName(folder)):
		s.Name = normaliseName(folder)
		warns = append(warns, Warning{File: path, Line: 1,
			Msg: fmt.Sprintf("frontmatter has no valid name and the folder name %q is not valid; loaded as %q", folder, s.Name)})
	default:
		line := 1
		if raw.node != nil {
			line = raw.node.Line + fm.lineOff
		}
		return fail(line, fmt.Errorf("neither name %q nor folder %q is a valid skill name: %w", raw.value, folder, ErrInvalidName))
	}
	if s.Description == "" {
		return fail(1, ErrNoDescription)
	}
	s.Warnings = warns
	return s, warns, nil
}

// firstInvalidLine returns the 1-based line of the first invalid UTF-8 byte.
func firstInvalidLine(data []byte) int {
	line := 1
	for len(data) > 0 {
		r, size := utf8.DecodeRune(data)
		if r == utf8.RuneError && size <= 1 {
			return line
		}
		if r == '\n' {
			line++
		}
		data = data[size:]
	}
	return line
}
