package channels

import (
	"regexp"
	"strings"
	"sync"
)

// PlainText renders the model's Markdown as plain text, for a surface
// that shows no Markdown (a terminal, a WeChat bubble): emphasis markers
// go, a heading is its text, a link is "text (url)", a bullet is "• ",
// a fenced code block loses its fences and keeps its code, indented, and
// a table is left as its rows. Leading and trailing blank lines go.
func PlainText(md string) string {
	var r PlainTextRenderer
	var b strings.Builder
	for _, line := range strings.Split(md, "\n") {
		if out, ok := r.Line(line); ok {
			b.WriteString(out)
			b.WriteByte('\n')
		}
	}
	return strings.TrimLeft(strings.TrimRight(b.String(), " \t\r\n"), "\r\n")
}

// PlainTextRenderer renders Markdown one line at a time, for text printed
// as it arrives; it remembers whether a line is inside a code block.
// The zero value is ready.
type PlainTextRenderer struct {
	fence string // the fence of the code block the next line is in; "" outside
}

// Line renders one whole line (without its newline). ok is false for a
// line that prints nothing: a code fence.
func (r *PlainTextRenderer) Line(line string) (out string, ok bool) {
	trimmed := strings.TrimSpace(line)
	if r.fence != "" {
		if closesFence(trimmed, r.fence) {
			r.fence = ""
			return "", false
		}
		return "    " + line, true
	}
	if f := openingFence(trimmed); f != "" {
		r.fence = f
		return "", false
	}
	return blockLine(line), true
}

// Settled returns the part of partial, the start of a line not yet ended,
// that prints the same whatever follows it: up to the last space before
// which no marker is left open (an emphasis, a link, a code span), and
// not before the line's first word says what the line is (a heading, a
// bullet, a fence). "" when nothing is settled yet.
func (r *PlainTextRenderer) Settled(partial string) string {
	trimmed := strings.TrimSpace(partial)
	if r.fence != "" {
		if strings.HasPrefix(trimmed, r.fence[:1]) || trimmed == "" {
			return "" // may be the closing fence
		}
		return "    " + partial
	}
	if trimmed == "" || trimmed[0] == '`' || trimmed[0] == '~' {
		return "" // may open a code block
	}
	for cut := strings.LastIndexByte(partial, ' '); cut > 0; cut = strings.LastIndexByte(partial[:cut], ' ') {
		out := blockLine(partial[:cut])
		if strings.ContainsAny(out, "*_`[]~<\\") {
			continue // a marker may yet close
		}
		if next := blockLine(partial[:cut] + " x"); strings.HasPrefix(next, out) {
			return out
		}
	}
	return ""
}

// The expressions are compiled on first use: only what prints plain text
// needs them.
var (
	mdHeading  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`) })
	mdBullet   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)[-*+]\s+(\[[ xX]\]\s+)?`) })
	mdRule     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s{0,3}([-*_])(\s*[-*_]){2,}\s*$`) })
	mdImage    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`!\[([^\]\n]*)\]\(([^)\s]+)\)`) })
	mdLink     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\[([^\]\n]+)\]\(([^)\s]+)\)`) })
	mdAutoLink = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<((?:https?|mailto):[^>\s]+)>`) })
	mdStrong   = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\*\*(\S(?:[^*\n]*\S)?)\*\*|__(\S(?:[^_\n]*\S)?)__|~~(\S(?:[^~\n]*\S)?)~~`)
	})
	mdEmph = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(^|[^\w*])\*(\S(?:[^*\n]*\S)?)\*($|[^\w*])|(^|[^\w])_(\S(?:[^_\n]*\S)?)_($|[^\w])`)
	})
	mdEscape = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("\\\\([\\\\`*_{}\\[\\]()#+\\-.!|~<>])") })
)

// blockLine renders a line outside code blocks: its block marker (a
// heading's #, a bullet, a rule), then its inline Markdown.
func blockLine(line string) string {
	if m := mdHeading().FindStringSubmatch(line); m != nil {
		return inline(m[1])
	}
	if mdRule().MatchString(line) {
		return strings.Repeat("─", 20)
	}
	if loc := mdBullet().FindStringSubmatchIndex(line); loc != nil {
		return line[loc[2]:loc[3]] + "• " + inline(line[loc[1]:])
	}
	return inline(line)
}

// inline renders the inline Markdown of text: code spans keep their text
// as written (without the backticks), the rest loses its markers.
func inline(text string) string {
	var b strings.Builder
	for {
		open := strings.IndexByte(text, '`')
		if open < 0 {
			break
		}
		n := open
		for n < len(text) && text[n] == '`' {
			n++
		}
		ticks := text[open:n]
		end := strings.Index(text[n:], ticks)
		if end < 0 {
			break
		}
		b.WriteString(inlineMarks(text[:open]))
		b.WriteString(strings.TrimSpace(text[n : n+end]))
		text = text[n+end+len(ticks):]
	}
	b.WriteString(inlineMarks(text))
	return b.String()
}

// inlineMarks renders text without code spans: images and links become
// "text (url)" (the url alone when it is the text), emphasis loses its
// markers, escapes their backslash.
func inlineMarks(s string) string {
	link := func(m []string) string {
		if m[1] == m[2] || m[1] == "" {
			return m[2]
		}
		return m[1] + " (" + m[2] + ")"
	}
	s = replaceSubmatch(mdImage(), s, link)
	s = replaceSubmatch(mdLink(), s, link)
	s = mdAutoLink().ReplaceAllString(s, "$1")
	for range 2 { // nested (**_x_**) and adjacent (*a* *b*) markers
		s = mdStrong().ReplaceAllString(s, "$1$2$3")
		s = mdEmph().ReplaceAllString(s, "$1$2$3$4$5$6")
	}
	return mdEscape().ReplaceAllString(s, "$1")
}

func replaceSubmatch(re *regexp.Regexp, s string, fn func([]string) string) string {
	return re.ReplaceAllStringFunc(s, func(m string) string { return fn(re.FindStringSubmatch(m)) })
}
