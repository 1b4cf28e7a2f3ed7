package skills

import (
	"slices"
	"strings"
)

// newCatalog builds a catalog directly, bypassing the file system.
func newCatalog(skills ...*Skill) *Catalog {
	c := &Catalog{byName: map[string]*Skill{}}
	for _, s := range skills {
		if s.Source == "" {
			s.Source = SourceUser
		}
		c.byName[s.Name] = s
		c.sorted = append(c.sorted, s)
	}
	slices.SortFunc(c.sorted, func(a, b *Skill) int { return strings.Compare(a.Name, b.Name) })
	return c
}
