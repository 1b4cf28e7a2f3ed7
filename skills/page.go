package skills

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// BodyChunkBytes is the page size for skill bodies and files handed to the
// model: big enough for a runbook, small enough to keep context affordable.
const BodyChunkBytes = 5 * 1024

// page returns the chunk of text starting at byte offset and the offset the
// next chunk starts at (len(text) when nothing is left). A chunk ends on a
// line boundary when one exists within BodyChunkBytes; a single longer line
// is cut at a rune boundary. An offset inside a rune moves forward to the
// next rune so that a sloppy offset never yields broken UTF-8.
func page(text string, offset int) (string, int, error) {
	if offset < 0 || offset > len(text) {
		return "", 0, fmt.Errorf("offset %d is outside 0..%d: %w", offset, len(text), ErrBadOffset)
	}
	for offset < len(text) && !utf8.RuneStart(text[offset]) {
		offset++
	}
	end := offset + BodyChunkBytes
	if end >= len(text) {
		return text[offset:], len(text), nil
	}
	if nl := strings.LastIndexByte(text[offset:end], '\n'); nl >= 0 {
		end = offset + nl + 1
	} else {
		for end > offset && !utf8.RuneStart(text[end]) {
			end--
		}
	}
	return text[offset:end], end, nil
}

// continueHint is the line telling the model how to read on.
func continueHint(name, file string, next int) string {
	return fmt.Sprintf("[truncated: continue with load_skill(name=%q, file=%q, offset=%d)]", name, file, next)
}

// pageWithHint returns one page of text, followed by a continue hint on its
// own line when more remains.
func pageWithHint(text string, offset int, name, file string) (string, error) {
	chunk, next, err := page(text, offset)
	if err != nil {
		return "", err
	}
	if next >= len(text) {
		return chunk, nil
	}
	if !strings.HasSuffix(chunk, "\n") {
		chunk += "\n"
	}
	return chunk + continueHint(name, file, next), nil
}
