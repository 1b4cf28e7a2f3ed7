package skills

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
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
	// Body is the Markdown after the frontmatter (LF line ends, leading
	// blank lines dropped) when it is in memory: ParseSkillFile and
	// skills built by hand fill it. A Catalog keeps it empty — start-up
	// reads the frontmatter only — and ReadBody reads it from disk when
	// the skill is loaded. Use ReadBody and BodyBytes, not the field.
	Body     string
	BodyLine int // 1-based line of SKILL.md where the body starts

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

	// onDisk is set for a catalog skill whose body stays on disk; bodyOff
	// is where the body starts in the normalised SKILL.md text and bodyLen
	// its length.
	onDisk  bool
	bodyOff int
	bodyLen int
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

// BodyBytes is the size of the body in bytes, known without reading it.
func (s *Skill) BodyBytes() int {
	if s.onDisk {
		return s.bodyLen
	}
	return len(s.Body)
}

// ReadBody returns the skill's body: Body when it is in memory, else the
// body of SKILL.md read from disk now. The read is fenced like every other
// read of a skill's files (the folder must still be inside its layer, the
// file a regular file, not a symlink, within MaxSkillFileBytes), and the
// file must still be the one loaded: when its SHA-256 differs from
// s.SHA256 the result is ErrChanged, so frontmatter, trust and body never
// come from different versions of the file. A reload picks the new one up.
func (s *Skill) ReadBody() (string, error) {
	if !s.onDisk {
		return s.Body, nil
	}
	data, err := readSkillMD(s.Root, s.Dir)
	if err != nil {
		return "", fmt.Errorf("skill %s: %s: %w", s.Name, skillFileName, err)
	}
	sum := sha256.Sum256(data)
	text := normalise(data)
	if hex.EncodeToString(sum[:]) != s.SHA256 || s.bodyOff > len(text) || len(text)-s.bodyOff != s.bodyLen {
		return "", fmt.Errorf("skill %s: %s changed on disk since the skills were loaded; reload the skills to use the new version: %w", s.Name, skillFileName, ErrChanged)
	}
	return text[s.bodyOff:], nil
}

// readSkillMD reads dir/SKILL.md through an os.Root on the folder
// skillFolder vouches for, refusing a symlinked or oversized file.
func readSkillMD(layerRoot, dir string) ([]byte, error) {
	real, err := skillFolder(layerRoot, dir)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("open folder: %w", cleanPathErr(err))
	}
	defer root.Close()
	fi, err := root.Lstat(skillFileName)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, ErrNotFound
		}
		return nil, cleanPathErr(err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file: %w", ErrPathEscape)
	}
	f, err := root.Open(skillFileName)
	if err != nil {
		return nil, fmt.Errorf("open: %w", cleanPathErr(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSkillFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", cleanPathErr(err))
	}
	if len(data) > MaxSkillFileBytes {
		return nil, fmt.Errorf("over the %d-byte limit: %w", MaxSkillFileBytes, ErrTooLarge)
	}
	return data, nil
}
