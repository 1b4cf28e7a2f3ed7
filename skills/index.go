package skills

import (
	"strings"
)

// Index budgets: the section rides in every system prompt, so it is capped
// per description, per skill count and in total.
const (
	IndexMaxDescription = 500  // code points per description
	IndexMaxSkills      = 20   // entries
	IndexMaxBytes       = 4096 // whole section, header included
)

// indexHeader tells the model how to use the list in one line.
const indexHeader = "## Skills — call load_skill(name) to get a skill's full instructions before acting on it; call find_skills(query) when nothing listed fits.\n"

// Index renders the system-prompt section listing the name and description
// of each skill that is visible (nil means all) and model-invocable, in name
// order. Descriptions are flattened to one line and cut at
// IndexMaxDescription code points; entries past IndexMaxSkills, or that would
// push the section over IndexMaxBytes, are left out whole. omitted names
// every skill left out or truncated, in name order, so the caller can warn.
// The output depends only on the catalog and visible, so it is
// byte-identical while skills do not change (prompt caches depend on it).
// It is "" when no skill is visible.
func (c *Catalog) Index(visible func(*Skill) bool) (text string, omitted []string) {
	var b strings.Builder
	count := 0
	for _, s := range c.sorted {
		if s.DisableModelInvocation || (visible != nil && !visible(s)) {
			continue
		}
		if count >= IndexMaxSkills {
			omitted = append(omitted, s.Name)
			continue
		}
		desc, cut := truncateRunes(oneLine(s.Description), IndexMaxDescription)
		entry := "- " + s.Name + ": " + desc + "\n"
		size := b.Len() + len(entry)
		if b.Len() == 0 {
			size += len(indexHeader)
		}
		if size > IndexMaxBytes {
			// Whole entries only: half a description misleads more than none.
			omitted = append(omitted, s.Name)
			continue
		}
		if b.Len() == 0 {
			b.WriteString(indexHeader)
		}
		b.WriteString(entry)
		count++
		if cut {
			omitted = append(omitted, s.Name)
		}
	}
	return b.String(), omitted
}
