package skills

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// oneLine collapses every run of whitespace (including newlines from block
// scalars) to one space and drops control characters, so a description
// cannot break the index's one-entry-per-line layout.
func oneLine(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = b.Len() > 0
		case unicode.IsControl(r):
		default:
			if space {
				b.WriteByte(' ')
				space = false
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// truncateRunes cuts s to at most max code points, ending with "…" when cut.
func truncateRunes(s string, max int) (string, bool) {
	if utf8.RuneCountInString(s) <= max {
		return s, false
	}
	n := 0
	for i := range s {
		if n == max-1 {
			return strings.TrimRight(s[:i], " ") + "…", true
		}
		n++
	}
	return s, false
}
