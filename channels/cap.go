package channels

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// PostCounter is implemented by a Channel that sends a long reply as
// several posts but is not a Poster: Posts is the number of posts Send
// would make of text for m. (A Poster's posts are its Parts.)
type PostCounter interface {
	Posts(m Message, text string) int
}

// CapReply cuts text to at most maxChars characters and, when posts is not
// nil, to a prefix that posts counts as at most maxPosts posts. A cut text
// ends at a paragraph, line or word break where one is near, closes a code
// block it leaves open, and ends with a note saying where it was cut, so
// that nobody takes it for the whole answer. Zero or less lifts a cap. ok
// reports that text was cut.
func CapReply(text string, maxChars, maxPosts int, posts func(string) int) (string, bool) {
	end := len(text)
	if maxChars > 0 && utf8.RuneCountInString(text) > maxChars {
		end = runeOffset(text, maxChars)
	}
	cut := end < len(text)
	out := text
	if cut {
		out = cutAt(text, end)
	}
	if maxPosts <= 0 || posts == nil || posts(out) <= maxPosts {
		return out, cut
	}
	// The longest prefix that still fits: lo always fits (the note
	// alone is one post), hi never does.
	lo, hi := 0, end
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if posts(cutAt(text, mid)) <= maxPosts {
			lo = mid
		} else {
			hi = mid
		}
	}
	return cutAt(text, lo), true
}

// runeOffset is the byte offset of the n-th rune of s.
func runeOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}

// cutAt keeps text up to about byte end, preferring a paragraph, line or
// word break in the last quarter, closes an open code block and adds the
// note.
func cutAt(text string, end int) string {
	for end > 0 && end < len(text) && !utf8.RuneStart(text[end]) {
		end--
	}
	kept := text[:end]
	for _, br := range []string{"\n\n", "\n", " "} {
		if i := strings.LastIndex(kept, br); i > 0 && i >= end*3/4 {
			kept = kept[:i]
			break
		}
	}
	kept = strings.TrimRightFunc(kept, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' })
	if fence := openFence(kept); fence != "" {
		kept += "\n" + fence
	}
	note := fmt.Sprintf("… answer cut at %d characters", utf8.RuneCountInString(kept))
	if kept == "" {
		return note
	}
	return kept + "\n\n" + note
}

// openFence returns the fence of the code block text leaves open, or "".
func openFence(text string) string {
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence == "" {
			fence = openingFence(trimmed)
		} else if closesFence(trimmed, fence) {
			fence = ""
		}
	}
	return fence
}
