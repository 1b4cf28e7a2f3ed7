package context

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestPlainPathsChangeNothing: where label and clean take their short
// path (the text returned as it is), the long one returns the same, for
// strings made of the bytes each treats specially.
func TestPlainPathsChangeNothing(t *testing.T) {
	pieces := []string{"a", "Z", "0", " ", "  ", "\t", "\n", "\r", "\r\n", "\v", "(", ")", "[", "]", ":", "~", "\x7f", "\x00", "\x1b",
		"é", "\u200b", "\u202e", "\u00a0", "\u2028", "\xff", "…"}
	r := rand.New(rand.NewPCG(1, 2))
	plain := 0
	for range 20000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		s := b.String()
		n := 1 + r.IntN(16)
		if plainLabel(s, n) {
			plain++
			if got := labelAny(s, n); got != s {
				t.Errorf("label(%q, %d): the short path keeps it, the long one gives %q", s, n, got)
			}
		}
		if plainText(s) {
			plain++
			if got := cleanAny(s); got != s {
				t.Errorf("clean(%q): the short path keeps it, the long one gives %q", s, got)
			}
		}
		if got, want := label(s, n), labelAny(s, n); got != want {
			t.Errorf("label(%q, %d) = %q, want %q", s, n, got, want)
		}
		if got, want := clean(s), cleanAny(s); got != want {
			t.Errorf("clean(%q) = %q, want %q", s, got, want)
		}
	}
	if plain < 1000 {
		t.Fatalf("only %d strings took a short path: the test tests little", plain)
	}
}
