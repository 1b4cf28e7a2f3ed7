// Package identtest gives tests the strings to hold an ident check
// against the regular expression it replaced.
package identtest

import (
	"regexp"
	"strings"
	"testing"
)

// Samples returns strings around every boundary such a check has: the
// lengths near each bound the checks use (up to 300), of a letter, a digit
// and punctuation, with the bytes next to the usual ranges (before and
// after a-z, A-Z, 0-9), punctuation, non-ASCII and control bytes at the
// start, in the middle and at the end.
func Samples() []string {
	odd := []string{"", "a", "z", "A", "Z", "0", "9", "_", "-", ".", "/", ":", "@", "[", "`", "{", "\x7f", " ", "\n", "é", "\xff", "\x00", "U", "W", "ou_", "^", "$"}
	var lengths []int
	for _, bound := range []int{0, 3, 20, 47, 62, 63, 64, 256, 300} {
		for n := max(bound-3, 0); n <= bound+3; n++ {
			lengths = append(lengths, n)
		}
	}
	var out []string
	for _, n := range lengths {
		for _, fill := range []string{"a", "B", "7", "_", "-", "."} {
			base := strings.Repeat(fill, n)
			out = append(out, base)
			for _, o := range odd {
				out = append(out, o+base, base+o)
				if n >= 2 {
					out = append(out, base[:n/2]+o+base[n/2:])
				}
			}
		}
	}
	return out
}

// Same fails t for every sample that re and check disagree on.
func Same(t *testing.T, re string, check func(string) bool) {
	t.Helper()
	rx := regexp.MustCompile(re)
	bad := 0
	for _, s := range Samples() {
		if got, want := check(s), rx.MatchString(s); got != want {
			if bad++; bad <= 5 {
				t.Errorf("%s: %q: check says %v, the expression %v", re, s, got, want)
			}
		}
	}
}
