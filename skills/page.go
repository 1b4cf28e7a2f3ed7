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
	// A code block that opens in this chunk and runs past its end moves
	// whole to the next chunk: half a command is worse than none. Only a
	// block that alone fills a chunk is cut (pageWithHint closes it).
	if f, ok := openFence(text, end); ok && f.start > offset {
		end = f.start
	}
	return text[offset:end], end, nil
}

// fence is an open fenced code block: its opening line, where that line
// starts, and the marker run ("```", "~~~~") a closing line must repeat.
type fence struct {
	line   string
	start  int
	marker string
}

// openFence reports the fenced code block open at byte position pos of
// text, scanning from the start (skill files are small). Fences are
// recognised at any indentation, since skills nest them in list items.
func openFence(text string, pos int) (fence, bool) {
	var f fence
	for i := 0; i < pos; {
		end, next := pos, pos
		if j := strings.IndexByte(text[i:pos], '\n'); j >= 0 {
			end, next = i+j, i+j+1
		}
		line := text[i:end]
		switch {
		case f.marker == "":
			if m := fenceMarker(line); m != "" {
				f = fence{line: strings.TrimRight(line, "\r"), start: i, marker: m}
			}
		case closesFence(line, f.marker):
			f = fence{}
		}
		i = next
	}
	return f, f.marker != ""
}

// fenceMarker returns the run of three or more backticks or tildes that
// opens a code block on line, or "".
func fenceMarker(line string) string {
	t := strings.TrimLeft(line, " \t")
	if !strings.HasPrefix(t, "```") && !strings.HasPrefix(t, "~~~") {
		return ""
	}
	n := len(t) - len(strings.TrimLeft(t, t[:1]))
	if t[0] == '`' && strings.Contains(t[n:], "`") {
		return "" // an inline code span such as ```x``` opens nothing
	}
	return t[:n]
}

// closesFence reports whether line closes a block opened with marker: the
// same character, at least as many, and nothing after them.
func closesFence(line, marker string) bool {
	t := strings.TrimLeft(line, " \t")
	n := len(t) - len(strings.TrimLeft(t, marker[:1]))
	return n >= len(marker) && strings.TrimSpace(t[n:]) == ""
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
	// Each page is whole Markdown: a code block too long for one page is
	// closed at the cut and opened again, with its language, on the next.
	if f, ok := openFence(text, offset); ok && offset > 0 {
		chunk = f.line + "\n" + chunk
	}
	if next >= len(text) {
		return chunk, nil
	}
	if !strings.HasSuffix(chunk, "\n") {
		chunk += "\n"
	}
	if f, ok := openFence(text, next); ok {
		chunk += f.marker + "\n"
	}
	return chunk + continueHint(name, file, next), nil
}
