package channels

import (
	"regexp"
	"strings"
	"testing"
)

// TestAccountNameIsThePattern holds validAccountName to the pattern it
// replaced, ^[a-z0-9][a-z0-9_-]{0,31}$, at every edge.
func TestAccountNameIsThePattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)
	for _, name := range []string{
		"", "a", "9", "-a", "_a", "a-", "hr_bot", "ops-2", "A", "Ops", "a.b", "a b", "a/b", "é",
		strings.Repeat("a", 32), strings.Repeat("a", 33), "a" + strings.Repeat("_", 31),
	} {
		if got, want := validAccountName(name), pattern.MatchString(name); got != want {
			t.Errorf("validAccountName(%q) = %v, want %v", name, got, want)
		}
	}
}
