package skills

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Summary renders the start-up report: one line per skill with its source
// (and what it replaced), description size, enabled or disabled, trust for
// workspace skills (trusted nil: unknown), then totals and the index size.
// disabled may be nil.
//
// indexed names the skills the bot-wide index lists; the others that are
// enabled and model-invocable are marked "find_skills only", and a line
// states the rule (IndexRule).
func (c *Catalog) Summary(disabled map[string]bool, trusted func(*Skill) bool, indexBytes int, indexed map[string]bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Skills loaded (%d):\n", len(c.sorted))
	width := 0
	for _, s := range c.sorted {
		width = max(width, len(s.Name))
	}
	enabled := 0
	for _, s := range c.sorted {
		mark, state := "●", "enabled"
		if disabled[s.Name] {
			mark, state = "○", "disabled"
		} else {
			enabled++
		}
		src := string(s.Source)
		if s.Replaced != "" {
			src += " (replaces " + string(s.Replaced) + ")"
		}
		var notes []string
		notes = append(notes, state)
		if s.NeedsTrust() && trusted != nil {
			if trusted(s) {
				notes = append(notes, "trusted")
			} else {
				notes = append(notes, "untrusted")
			}
		}
		switch {
		case s.DisableModelInvocation:
			notes = append(notes, "manual only")
		case indexed[s.Name]:
			notes = append(notes, "indexed")
		case !disabled[s.Name]:
			notes = append(notes, "find_skills only")
		}
		if len(s.Warnings) > 0 {
			notes = append(notes, fmt.Sprintf("%d warning(s)", len(s.Warnings)))
		}
		fmt.Fprintf(&b, "  %s %-*s  %-28s  description %d chars  %s\n",
			mark, width, s.Name, src, utf8.RuneCountInString(s.Description), strings.Join(notes, ", "))
	}
	fmt.Fprintf(&b, "%d/%d enabled, index %d bytes (%.1f KiB)", enabled, len(c.sorted), indexBytes, float64(indexBytes)/1024)
	if n := len(c.warnings); n > 0 {
		fmt.Fprintf(&b, ", %d warning(s)", n)
	}
	fmt.Fprintf(&b, "\nThe index lists %d skill(s) (at most %d, %d bytes): %s; find_skills reaches the rest.\n",
		len(indexed), IndexMaxSkills, IndexMaxBytes, IndexRule)
	return b.String()
}
