package channels

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzSplit: whatever the text and the limit, Split returns chunks within
// the limit (a single rune wider than the limit aside), never an empty or
// blank one, never cut inside a UTF-8 sequence of valid input, and loses
// no visible character: the visible runes of the text all appear, in order,
// in the chunks.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"hello", "\f   ", "a\n\n\f   \n\nb", "```go\nx := 1\n```", "   \u00a0\u3000  ", strings.Repeat("word ", 40), strings.Repeat("你好", 30), "```\n\n\n```"} {
		f.Add(s, 16)
	}
	f.Fuzz(func(t *testing.T, text string, limit int) {
		if limit > 1<<16 || limit < -1 {
			return
		}
		chunks := Split(text, limit)
		for i, c := range chunks {
			if strings.TrimFunc(c, unicode.IsSpace) == "" {
				t.Fatalf("chunk %d of %q (limit %d) is blank: %q", i, text, limit, c)
			}
			if limit > 0 && len(c) > limit && utf8.RuneCountInString(c) > 1 {
				t.Fatalf("chunk %d is %d bytes, over the limit %d: %q", i, len(c), limit, c)
			}
			if utf8.ValidString(text) && !utf8.ValidString(c) {
				t.Fatalf("chunk %d cut inside a rune: %q", i, c)
			}
		}
		if !blank(text) && len(chunks) == 0 {
			t.Fatalf("text %q lost entirely", text)
		}
		if i, ok := keepsVisible(text, strings.Join(chunks, "\n")); !ok {
			t.Fatalf("Split(%q, %d) = %q lost visible rune %d of the text", text, limit, chunks, i)
		}
	})
}

// keepsVisible reports whether every visible rune of in appears in out, in
// order (out may add fences around the parts of a code block); if not, it
// returns the index of the first rune lost.
func keepsVisible(in, out string) (int, bool) {
	visible := func(r rune) bool { return !unicode.IsSpace(r) && !unicode.Is(unicode.Cf, r) }
	for i, r := range in {
		if !visible(r) {
			continue
		}
		j := strings.IndexRune(out, r) // RuneError finds any invalid byte
		if j < 0 {
			return i, false
		}
		_, size := utf8.DecodeRuneInString(out[j:])
		out = out[j+size:]
	}
	return 0, true
}
