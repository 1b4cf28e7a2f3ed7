package skills

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
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

// indexFooterReserve is room kept for the line counting the skills left
// out, whatever their number.
var indexFooterReserve = len(indexFooter(999999))

// indexFooter tells the model that the index is not everything.
func indexFooter(n int) string {
	if n == 1 {
		return "1 more skill is not listed here; find_skills(query) searches every skill.\n"
	}
	return fmt.Sprintf("%d more skills are not listed here; find_skills(query) searches every skill.\n", n)
}

// IndexOrder is what, besides the layers, decides which skills the index
// lists when more are visible than it has room for. It is configuration
// only: the index is a function of the skills and of it, so every process
// and replica with the same skills and configuration sends the same system
// prompt (providers' prompt caches are shared across a fleet). Load counts
// are not part of it; `parley skills list` shows them as advice for pins.
type IndexOrder struct {
	// Pinned names skills to list before the rest (skills.index), in order.
	Pinned []string
}

// IndexRule says in words which skills the index lists first; `parley
// skills list` shows it.
const IndexRule = "builtin skills, then workspace skills, then those named in skills.index, then by name"

// Index tiers, in the order of IndexRule.
const (
	tierBuiltin = iota
	tierWorkspace
	tierPinned
	tierRest
)

// rank orders the catalog's skills for the index (IndexRule): Parley's own
// builtins (also when a layer replaced one: the name is Parley's) and the
// project's workspace skills first, as they are the few the deployment
// chose; then the operator's pins; then by name.
func (c *Catalog) rank(o IndexOrder) []*Skill {
	pinned := map[string]int{}
	for i, n := range o.Pinned {
		if _, dup := pinned[n]; !dup {
			pinned[n] = i
		}
	}
	tier := func(s *Skill) int {
		if t, ok := c.leadTier(s); ok {
			return t
		}
		if _, ok := pinned[s.Name]; ok {
			return tierPinned
		}
		return tierRest
	}
	out := slices.Clone(c.sorted)
	slices.SortStableFunc(out, func(a, b *Skill) int {
		ta, tb := tier(a), tier(b)
		if ta != tb {
			return cmp.Compare(ta, tb)
		}
		if ta == tierPinned {
			return cmp.Compare(pinned[a.Name], pinned[b.Name])
		}
		return 0 // by name: c.sorted is
	})
	return out
}

// leadTier is s's tier when it is one of those listed before any pin:
// Parley's builtins (also when a layer replaced one: the name is
// Parley's), then the workspace's skills.
func (c *Catalog) leadTier(s *Skill) (int, bool) {
	switch {
	case s.Source == SourceBuiltin || c.builtin[s.Name]:
		return tierBuiltin, true
	case s.Source == SourceWorkspace:
		return tierWorkspace, true
	}
	return 0, false
}

// Pinnable reports whether naming s in skills.index moves it up the
// index: builtin and workspace skills are listed before any pin anyway.
func (c *Catalog) Pinnable(s *Skill) bool {
	_, leads := c.leadTier(s)
	return !leads
}

// WithOrder returns a copy of c whose index follows o (see IndexRule). The
// skills themselves are shared.
func (c *Catalog) WithOrder(o IndexOrder) *Catalog {
	cp := *c
	cp.ranked = c.rank(o)
	return &cp
}

// indexEntry is a skill's line in the index, and whether its description
// was cut to fit.
type indexEntry struct {
	text string
	cut  bool
}

// indexEntries keeps each skill's index line once made: the index is
// built for every turn, and flattening and cutting the descriptions was
// most of its cost. A skill never changes once loaded.
type indexEntries struct {
	mu sync.Mutex
	m  map[*Skill]indexEntry
}

func newIndexEntry(s *Skill) indexEntry {
	desc, cut := truncateRunes(oneLine(s.Description), IndexMaxDescription)
	return indexEntry{text: "- " + s.Name + ": " + desc + "\n", cut: cut}
}

// entry is s's index line, made once per catalog (each time when c was
// not built by Load).
func (c *Catalog) entry(s *Skill) indexEntry {
	if c.entries == nil {
		return newIndexEntry(s)
	}
	c.entries.mu.Lock()
	defer c.entries.mu.Unlock()
	e, ok := c.entries.m[s]
	if !ok {
		e = newIndexEntry(s)
		c.entries.m[s] = e
	}
	return e
}

// indexSelection is what the index lists and what it has no room for.
type indexSelection struct {
	text      string
	listed    []*Skill
	leftOut   []*Skill
	truncated []string // listed, with the description cut
}

// selectIndex fills the index from the visible (nil means all),
// model-invocable skills in IndexRule order. Descriptions are flattened to
// one line and cut at IndexMaxDescription code points; entries past
// IndexMaxSkills, or that would push the section over IndexMaxBytes, are
// left out whole, and a last line says how many were, and that
// find_skills reaches them.
func (c *Catalog) selectIndex(visible func(*Skill) bool) indexSelection {
	var sel indexSelection
	var b strings.Builder
	ranked := c.ranked
	if ranked == nil {
		ranked = c.sorted
	}
	for _, s := range ranked {
		if s.DisableModelInvocation || (visible != nil && !visible(s)) {
			continue
		}
		if len(sel.listed) >= IndexMaxSkills {
			sel.leftOut = append(sel.leftOut, s)
			continue
		}
		e := c.entry(s)
		entry, cut := e.text, e.cut
		size := b.Len() + len(entry) + indexFooterReserve
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
	if b.Len() > 0 && len(sel.leftOut) > 0 {
		b.WriteString(indexFooter(len(sel.leftOut)))
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
