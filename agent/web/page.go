package web

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PageBytes is the most one web_fetch result holds, header and footer
// included: a long document is read in pages, each ending with the offset
// of the next, so one fetch never floods the model's context.
const PageBytes = 16 << 10

// formatPage returns the page of text that starts at offset, with a header
// naming the source and a footer saying how to read on.
func formatPage(doc document, text string, offset int) (string, error) {
	total := len(text)
	if offset > 0 && offset >= total {
		return "", fmt.Errorf("offset %d is past the end: the document has %d bytes", offset, total)
	}
	offset = runeStartFrom(text, offset)
	source := doc.url.Redacted()

	var head strings.Builder
	fmt.Fprintf(&head, "Source: %s\n", source)
	kind := doc.mediaType
	if kind == "" {
		kind = "text"
	}
	if doc.html {
		kind += ", converted to Markdown"
	}
	if doc.truncated {
		fmt.Fprintf(&head, "Note: the document is larger than %d bytes; only its first %d bytes were read.\n", doc.size, doc.size)
	}
	rangeLine := func(from, to int) string {
		return fmt.Sprintf("Content: %s, %d bytes; this page holds bytes %d-%d.\n\n", kind, total, from, to)
	}
	footer := func(next int) string {
		if next >= total {
			return ""
		}
		return fmt.Sprintf("\n\n[%d more bytes follow: call web_fetch with url=%q and offset=%d to read on.]", total-next, source, next)
	}
	// Every number printed is at most total, so printing total (and adding
	// its digits for the footer's offset, printed here as 0) reserves
	// enough room for the real ones.
	budget := PageBytes - head.Len() - len(rangeLine(total, total)) - len(footer(0)) - len(strconv.Itoa(total))
	if budget < 1024 {
		return "", fmt.Errorf("the URL is too long to page through")
	}
	end := cutPoint(text, offset, budget)
	head.WriteString(rangeLine(offset, end))
	return head.String() + text[offset:end] + footer(end), nil
}

// runeStartFrom moves i forward to the start of a UTF-8 sequence, so an
// offset from a document that changed since never splits a character.
func runeStartFrom(s string, i int) int {
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// cutPoint returns where the page that starts at from ends: at most budget
// bytes on, preferably after a line break in the second half of the page,
// never inside a UTF-8 sequence.
func cutPoint(s string, from, budget int) int {
	end := from + budget
	if end >= len(s) {
		return len(s)
	}
	for end > from && !utf8.RuneStart(s[end]) {
		end--
	}
	if nl := strings.LastIndexByte(s[from+budget/2:end], '\n'); nl >= 0 {
		return from + budget/2 + nl + 1
	}
	if end == from { // a budget smaller than one character cannot happen, but never stall
		_, size := utf8.DecodeRuneInString(s[from:])
		return from + size
	}
	return end
}
