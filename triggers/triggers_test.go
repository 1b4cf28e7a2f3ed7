package triggers

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidNameIsThePattern holds ValidName to the pattern it replaced,
// ^[a-z0-9][a-z0-9_-]{0,62}$, at every edge.
func TestValidNameIsThePattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	for _, name := range []string{
		"", "a", "9", "-a", "_a", "a-", "a_b", "daily-digest", "A", "aB", "a.b", "a b", "a/b",
		"é", "a\x00", "a\n", strings.Repeat("a", 63), strings.Repeat("a", 64), "a" + strings.Repeat("-", 62),
	} {
		if got, want := ValidName(name), pattern.MatchString(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}
