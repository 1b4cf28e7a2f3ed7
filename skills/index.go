package skills

import (
	"slices"
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

// indexSelection is what the index lists and what it has no room for.
type indexSelection struct {
	text      string
	listed    []*Skill
	leftOut   []*Skill
	truncated []string // listed, with the description cut
}

// selectIndex fills the index from the visible (nil means all),
// model-invocable skills in name order. Descriptions are flattened to one
// line and cut at IndexMaxDescription code points; entries past
// IndexMaxSkills, or that would push the section over IndexMaxBytes, are
// left out whole.
func (c *Catalog) selectIndex(visible func(*Skill) bool) indexSelection {
	var sel indexSelection
	var b strings.Builder
	for _, s := range c.sorted {
		if s.DisableModelInvocation || (visible != nil && !visible(s)) {
			continue
		}
		if len(sel.listed) >= IndexMaxSkills {
			sel.leftOut = append(sel.leftOut, s)
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
			sel.leftOut = append(sel.leftOut, s)
			continue
		}
		if b.Len() == 0 {
			b.WriteString(indexHeader)
		}
		b.WriteString(entry)
		sel.listed = append(sel.listed, s)
		if cut {
			sel.truncated = append(sel.truncated, s.Name)
		}
	}
	sel.text = b.String()
	return sel
}

// Index renders the system-prompt section listing the name and description
// of each skill that is visible (nil means all) and model-invocable (see
// selectIndex for which make it). omitted names every skill left out or
// truncated, in name order, so the caller can warn. The output depends only
// on the catalog and visible, so it is byte-identical while skills do not
// change (prompt caches depend on it). It is "" when no skill is visible.
func (c *Catalog) Index(visible func(*Skill) bool) (text string, omitted []string) {
	sel := c.selectIndex(visible)
	omitted = slices.Clone(sel.truncated)
	for _, s := range sel.leftOut {
		omitted = append(omitted, s.Name)
	}
	slices.Sort(omitted)
	return sel.text, omitted
}

// IndexListing names the visible skills the index lists and those it
// leaves out (find_skills still reaches them), in index order.
func (c *Catalog) IndexListing(visible func(*Skill) bool) (listed, leftOut []string) {
	sel := c.selectIndex(visible)
	return names(sel.listed), names(sel.leftOut)
}

func names(ss []*Skill) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}
