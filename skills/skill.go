package skills

import (
	"fmt"
	"strings"
)

// Source tells which layer a skill came from. Later layers replace earlier
// ones: builtin < user < workspace.
type Source string

// The three skill layers, in ascending precedence.
const (
	SourceBuiltin   Source = "builtin"
	SourceUser      Source = "user"
	SourceWorkspace Source = "workspace"
)

// Skill is one loaded skill. Values handed out by a Catalog are shared and
// must be treated as read-only.
type Skill struct {
	Name        string // identity: valid frontmatter name, else the folder name
	Description string
	Source      Source
	Root        string // absolute layer root the skill was found under
	Dir         string // absolute skill folder (builtin: the extracted cache folder)
	Path        string // absolute path of SKILL.md
	Body        string // Markdown after the frontmatter (LF line ends, leading blank lines dropped)
	BodyLine    int    // 1-based line of SKILL.md where Body starts

	Version       string
	Author        string
	License       string
	Compatibility string
	Tags          []string
	// Metadata keeps each value's original text: 1.0 stays "1.0" and dates
	// stay as written, because YAML typing would silently reformat them.
	Metadata               map[string]string
	AllowedTools           []string
	DisableModelInvocation bool

	SHA256   string // hex SHA-256 of the SKILL.md bytes, for trust fingerprints
	Replaced Source // the source this skill overrode; "" if none
	Warnings []Warning
}

// NeedsTrust reports whether the skill must be trusted by an admin before
// its body may be injected as instructions. Only workspace skills travel
// with repositories the user did not write, so only they need it.
func (s *Skill) NeedsTrust() bool { return s.Source == SourceWorkspace }

// Warning is a non-fatal problem tied to a file position.
type Warning struct {
	File string
	Line int
	Msg  string
}

// SkippedPrefix starts the message of every warning about a skill that was
// not loaded at all, as opposed to a field dropped from a loaded one.
const SkippedPrefix = "skill skipped: "

// Skipped reports whether the warning is about a skill that was not loaded.
func (w Warning) Skipped() bool { return strings.HasPrefix(w.Msg, SkippedPrefix) }

// Reason is the message without SkippedPrefix.
func (w Warning) Reason() string { return strings.TrimPrefix(w.Msg, SkippedPrefix) }

// String formats the warning as "file:line: msg" (line omitted when 0).
func (w Warning) String() string {
	if w.Line <= 0 {
		return fmt.Sprintf("%s: %s", w.File, w.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", w.File, w.Line, w.Msg)
}
