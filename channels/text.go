package channels

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxWebhookBody is the largest webhook body an adapter reads. Every
// platform's events are far smaller; a larger body is refused unread.
const MaxWebhookBody = 1 << 20

// ErrBodyTooLarge is returned by ReadBody for a body over its limit.
var ErrBodyTooLarge = errors.New("channels: request body too large")

// ReadBody reads a webhook body of at most limit bytes. Signatures are
// computed over the raw bytes, so adapters read it whole before parsing.
func ReadBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, ErrBodyTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("channels: read body: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, ErrBodyTooLarge
	}
	return b, nil
}

// Split cuts Markdown text into chunks of at most limit bytes for platforms
// with a message size limit. It prefers paragraph breaks, then line breaks,
// then spaces, and never cuts inside a UTF-8 sequence. A fenced code block
// is never split while it fits in one chunk; one that does not fit is split
// on its lines and each part is closed and reopened with the same fence, so
// every chunk renders on its own.
//
// No chunk is blank: whitespace and invisible runes alone (a form feed, a
// no-break or zero-width space) are never a chunk, since the platforms
// refuse or show nothing for them.
func Split(text string, limit int) []string {
	text = strings.TrimSpace(text)
	if blank(text) {
		return nil
	}
	if limit <= 0 || len(text) <= limit {
		return []string{text}
	}
	chunks := split(text, limit)
	kept := chunks[:0]
	for _, c := range chunks {
		if !blank(c) {
			kept = append(kept, c)
		}
	}
	return kept
}

// blank reports text with nothing visible: only white space and format
// characters (zero-width spaces and joiners, the byte-order mark).
func blank(s string) bool {
	for _, r := range s {
		if !unicode.IsSpace(r) && !unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

func split(text string, limit int) []string {
	var chunks []string
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			chunks = append(chunks, s)
		}
		cur.Reset()
	}
	add := func(block string) {
		sep := ""
		if cur.Len() > 0 {
			sep = "\n\n"
		}
		if cur.Len()+len(sep)+len(block) <= limit {
			cur.WriteString(sep + block)
			return
		}
		flush()
		if len(block) <= limit {
			cur.WriteString(block)
			return
		}
		for _, piece := range splitBlock(block, limit) {
			chunks = append(chunks, piece)
		}
	}
	for _, block := range blocks(text) {
		add(block)
	}
	flush()
	return chunks
}

// blocks splits text into paragraphs, keeping each fenced code block whole
// and on its own (blank lines inside a fence do not end it). Fences follow CommonMark: a
// run of three or more backticks or tildes opens one, and only a line of the
// same character, at least as long and with nothing after it, closes it.
func blocks(text string) []string {
	var out []string
	var cur []string
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case fence != "":
			cur = append(cur, line)
			if closesFence(trimmed, fence) { // the block ends with its fence
				fence = ""
				out = append(out, strings.Join(cur, "\n"))
				cur = nil
			}
			continue
		case openingFence(trimmed) != "":
			fence = openingFence(trimmed)
			if len(cur) > 0 { // a fence starts a block of its own
				out = append(out, strings.Join(cur, "\n"))
				cur = nil
			}
		case trimmed == "":
			if len(cur) > 0 {
				out = append(out, strings.Join(cur, "\n"))
				cur = nil
			}
			continue
		}
		cur = append(cur, line)
	}
	if len(cur) > 0 {
		out = append(out, strings.Join(cur, "\n"))
	}
	return out
}

// openingFence returns the fence (the run of backticks or tildes) that
// trimmed opens, or "" when it opens none.
func openingFence(trimmed string) string {
	if trimmed == "" || (trimmed[0] != '`' && trimmed[0] != '~') {
		return ""
	}
	n := 0
	for n < len(trimmed) && trimmed[n] == trimmed[0] {
		n++
	}
	if n < 3 || (trimmed[0] == '`' && strings.Contains(trimmed[n:], "`")) {
		return "" // ```code``` on one line is inline code
	}
	return trimmed[:n]
}

// closesFence reports whether trimmed closes a block opened by fence.
func closesFence(trimmed, fence string) bool {
	n := 0
	for n < len(trimmed) && trimmed[n] == fence[0] {
		n++
	}
	return n >= len(fence) && strings.TrimSpace(trimmed[n:]) == ""
}

// minCodeRoom is the least room for code a re-fenced part must leave; with
// less, the fences would be most of every message, so the block is cut
// plainly instead.
const minCodeRoom = 16

// splitBlock cuts one oversized block on lines (then spaces, then runes).
// The parts of a fenced code block are each closed and reopened with the
// block's own fence and info string when the limit leaves room for them;
// otherwise (a limit smaller than the fences, or a block that is nothing
// but its fences and a long info string) the block is cut as plain text,
// fence lines included, so that no character is lost.
func splitBlock(block string, limit int) []string {
	lines := strings.Split(block, "\n")
	opening, closing := strings.TrimSpace(lines[0]), ""
	body := lines
	if fence := openingFence(opening); fence != "" {
		closing = fence
		body = lines[1:]
		if n := len(body); n > 0 && closesFence(strings.TrimSpace(body[n-1]), fence) {
			closing = strings.TrimSpace(body[n-1])
			body = body[:n-1]
		}
	}
	room := limit
	if closing != "" {
		room = limit - len(opening) - len(closing) - 2 // two line breaks
	}
	if closing == "" || room < minCodeRoom || blank(strings.Join(body, "\n")) {
		return cutLines(lines, limit, func(s string) string { return s })
	}
	return cutLines(body, room, func(s string) string { return opening + "\n" + s + "\n" + closing })
}

// cutLines packs lines into parts of at most room bytes (before wrap), cutting
// a line longer than room at a space or rune boundary. A part with nothing
// visible is dropped, never sent.
func cutLines(lines []string, room int, wrap func(string) string) []string {
	var parts []string
	var cur strings.Builder
	emit := func() {
		if s := cur.String(); !blank(s) {
			parts = append(parts, wrap(s))
		}
		cur.Reset()
	}
	for _, line := range lines {
		for len(line) > room {
			emit()
			cut := cutPoint(line, room)
			cur.WriteString(line[:cut])
			emit()
			line = strings.TrimLeft(line[cut:], " ")
		}
		if cur.Len() > 0 && cur.Len()+1+len(line) > room {
			emit()
		}
		if cur.Len() > 0 {
			cur.WriteByte('\n')
		}
		cur.WriteString(line)
	}
	emit()
	return parts
}

// cutPoint is the byte index at which to cut s to at most n bytes: the last
// space if there is one in the second half, else a rune boundary.
func cutPoint(s string, n int) int {
	if i := strings.LastIndexByte(s[:n], ' '); i > n/2 {
		return i
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	if n == 0 { // a single rune wider than n: take it whole
		_, size := utf8.DecodeRuneInString(s)
		return size
	}
	return n
}
