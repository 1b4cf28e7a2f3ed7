package skills

import (
	"fmt"
	"strings"
)

// InjectionMarker is the first line of every injection message. The agent
// and compaction use it to tell injected skill bodies from real user input.
const InjectionMarker = "[PARLEY_SKILL_INJECTION]"

// headingPrefix starts the second line of an injection message.
const headingPrefix = "## Loaded skill: "

// InjectionText builds the user-role message that carries a loaded skill's
// body: the marker line, a heading with name and source, the rule for
// relative paths (never the folder's host path), and the first BodyChunkBytes of the body
// (cut on a line boundary, read with Skill.ReadBody: from disk for a catalog
// skill) with a hint to read on when cut. A body that cannot be read (the
// file changed since loading, or is gone) is replaced by a line saying why.
func InjectionText(s *Skill) string {
	var b strings.Builder
	b.WriteString(InjectionMarker + "\n")
	fmt.Fprintf(&b, "%s%s (source: %s)\n", headingPrefix, s.Name, s.Source)
	// The folder is named, never its place on the server: host paths tell
	// the model (and whoever reads its output) nothing it can use.
	fmt.Fprintf(&b, "Skill folder: relative paths in this skill (references/, scripts/, assets/) are inside its folder; read its files with load_skill(name=%q, file=\"relative/path\").\n", s.Name)
	b.WriteString("These are the skill's instructions, loaded by load_skill: follow them to continue the current task.\n\n")
	body, err := SkillFileChunk(s, 0)
	if err != nil {
		// The signature has no room for an error: say it in the message,
		// which the model reads, rather than inject an empty skill.
		body = fmt.Sprintf("[the skill's instructions could not be read: %v]\n", err)
	}
	b.WriteString(body)
	return b.String()
}

// ParseInjection reports whether content is an injection message built by
// InjectionText and, if so, which skill it carries.
func ParseInjection(content string) (name string, ok bool) {
	first, rest, _ := strings.Cut(content, "\n")
	if strings.TrimRight(first, " \r") != InjectionMarker {
		return "", false
	}
	heading, _, _ := strings.Cut(rest, "\n")
	heading = strings.TrimRight(heading, " \r")
	after, found := strings.CutPrefix(heading, headingPrefix)
	if !found {
		return "", false
	}
	name, _, found = strings.Cut(after, " (source: ")
	if !found || !ValidName(name) {
		return "", false
	}
	return name, true
}

// SkillFileChunk returns the skill body from byte offset: one BodyChunkBytes
// page cut on a line boundary, followed, when more remains, by a hint line
// load_skill(name=…, file="SKILL.md", offset=N). It serves both the
// injection's continuation and load_skill(file="SKILL.md").
func SkillFileChunk(s *Skill, offset int) (string, error) {
	text, err := s.ReadBody()
	if err != nil {
		return "", err
	}
	out, err := pageWithHint(text, offset, s.Name, skillFileName)
	if err != nil {
		return "", fmt.Errorf("skill %s SKILL.md: %w", s.Name, err)
	}
	return out, nil
}
