package skills

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// SummaryState is what the start-up report and `parley skills list` know
// of the skills beyond the catalog.
type SummaryState struct {
	// Disabled names the skills switched off; nil: none.
	Disabled map[string]bool
	// Trusted reports whether a workspace skill is trusted; nil: unknown.
	Trusted func(*Skill) bool
	// Indexed names the skills the bot-wide index lists, and IndexBytes
	// is its size: what the system prompt really holds, so untrusted
	// workspace skills are never among them.
	Indexed    map[string]bool
	IndexBytes int
	// Uses counts the loads of each skill; nil: not counted (no Redis).
	Uses map[string]int64
	// Pinned is skills.index, which the advice on pins extends.
	Pinned []string
}

// pinAdviceMax bounds the skills the advice on pins names.
const pinAdviceMax = 5

// Summary renders the start-up report: one line per skill with its source
// (and what it replaced), description size, enabled or disabled, trust for
// workspace skills, where the model finds it, how often it was loaded,
// then totals, the index size and the rule (IndexRule).
//
// An enabled, model-invocable skill the index does not list is marked
// "find_skills only", or "find_skills only (untrusted)" for an untrusted
// workspace skill, which the index never lists whatever its room.
func (c *Catalog) Summary(st SummaryState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Skills loaded (%d):\n", len(c.sorted))
	width := 0
	for _, s := range c.sorted {
		width = max(width, len(s.Name))
	}
	enabled := 0
	for _, s := range c.sorted {
		mark := "●"
		if st.Disabled[s.Name] {
			mark = "○"
		} else {
			enabled++
		}
		src := string(s.Source)
		if s.Replaced != "" {
			src += " (replaces " + string(s.Replaced) + ")"
		}
		fmt.Fprintf(&b, "  %s %-*s  %-28s  description %d chars  %s\n",
			mark, width, s.Name, src, utf8.RuneCountInString(s.Description), strings.Join(st.notes(s), ", "))
	}
	fmt.Fprintf(&b, "%d/%d enabled, index %d bytes (%.1f KiB)", enabled, len(c.sorted), st.IndexBytes, float64(st.IndexBytes)/1024)
	if n := len(c.warnings); n > 0 {
		fmt.Fprintf(&b, ", %d warning(s)", n)
	}
	fmt.Fprintf(&b, "\nThe index lists %d skill(s) (at most %d, %d bytes): %s; find_skills reaches the rest.\n",
		len(st.Indexed), IndexMaxSkills, IndexMaxBytes, IndexRule)
	if advice := c.pinAdvice(st); advice != "" {
		b.WriteString(advice)
	}
	return b.String()
}

// notes are what s's line says after its description's size: enabled or
// disabled, trust (for workspace skills, when known), where the model
// finds it, its loads and warnings.
func (st SummaryState) notes(s *Skill) []string {
	disabled := st.Disabled[s.Name]
	notes := []string{"enabled"}
	if disabled {
		notes[0] = "disabled"
	}
	trust := ""
	if s.NeedsTrust() && st.Trusted != nil {
		trust = "trusted"
		if !st.Trusted(s) {
			trust = "untrusted"
		}
	}
	place := ""
	switch {
	case s.DisableModelInvocation:
		place = "manual only"
	case st.Indexed[s.Name]:
		place = "indexed"
	case disabled:
	case trust == "untrusted":
		// The index never lists it, whatever its room; trust says it once.
		place, trust = "find_skills only (untrusted)", ""
	default:
		place = "find_skills only"
	}
	for _, n := range []string{trust, place} {
		if n != "" {
			notes = append(notes, n)
		}
	}
	if n := st.Uses[s.Name]; n > 0 {
		notes = append(notes, plural(n, "load"))
	}
	if len(s.Warnings) > 0 {
		notes = append(notes, fmt.Sprintf("%d warning(s)", len(s.Warnings)))
	}
	return notes
}

// pinAdvice names the most loaded skills the index leaves out that a pin
// would move up, and the skills.index that pins them after the current
// pins; "" when there are none. Load counts decide nothing by themselves:
// the index must stay the same in every process, so pinning is the
// operator's call.
func (c *Catalog) pinAdvice(st SummaryState) string {
	var cands []*Skill
	for _, s := range c.sorted {
		if st.Uses[s.Name] > 0 && !st.Indexed[s.Name] && !st.Disabled[s.Name] &&
			!s.DisableModelInvocation && c.Pinnable(s) && !slices.Contains(st.Pinned, s.Name) {
			cands = append(cands, s)
		}
	}
	if len(cands) == 0 {
		return ""
	}
	slices.SortStableFunc(cands, func(a, b *Skill) int { return cmp.Compare(st.Uses[b.Name], st.Uses[a.Name]) })
	cands = cands[:min(len(cands), pinAdviceMax)]
	var listed []string
	pins := slices.Clone(st.Pinned)
	for _, s := range cands {
		listed = append(listed, fmt.Sprintf("%s (%s)", s.Name, plural(st.Uses[s.Name], "load")))
		pins = append(pins, s.Name)
	}
	return fmt.Sprintf("Loaded often but left out of the index: %s. To list them, pin them: skills.index: [%s]\n",
		strings.Join(listed, ", "), strings.Join(pins, ", "))
}

// plural is "1 load", "3 loads".
func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
