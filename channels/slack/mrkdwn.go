package slack

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// ToMrkdwn converts the Markdown a model writes into Slack's mrkdwn:
// **bold** → *bold*, *italic* → _italic_, ~~strike~~ → ~strike~,
// [text](url) → <url|text>, headings → bold lines, bullets → •, tables →
// code blocks. Fenced code blocks and inline code keep their text (a
// fence's language tag is dropped: mrkdwn would show it as code).
//
// &, < and > are escaped everywhere — in code spans, code blocks and
// tables too, since Slack reads control sequences there as well and shows
// the escapes as the characters — so model text can never form a Slack
// control sequence: no broadcast (<!here>, <!channel>, <!everyone>), no user,
// group or channel mention (<@U…>, <!subteam^…>, <#C…>). Only when
// allowMentions is set (an operator's slack.allow_mentions) are the
// mentions and broadcasts the model writes in running text kept, so it can
// address people; inside code they stay text.
//
// Slack only formats a marker next to a space or punctuation, so where a
// converted marker touches a letter (common in Chinese and Japanese, which
// have no spaces) a zero-width space is put between them.
func ToMrkdwn(md string, allowMentions bool) string {
	md = strings.ReplaceAll(md, "\r\n", "\n")
	lines := strings.Split(md, "\n")
	out := make([]string, 0, len(lines))
	fence := "" // the opening fence while inside a code block
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if closesFence(trimmed, fence) {
				out = append(out, "```")
				fence = ""
				continue
			}
			out = append(out, escaper.Replace(line))
			continue
		}
		if f := openingFence(trimmed); f != "" {
			fence = f
			out = append(out, "```")
			continue
		}
		if isTableStart(lines, i) {
			out = append(out, "```")
			for ; i < len(lines) && strings.Contains(lines[i], "|") && strings.TrimSpace(lines[i]) != ""; i++ {
				out = append(out, escaper.Replace(lines[i]))
			}
			out = append(out, "```")
			i--
			continue
		}
		out = append(out, convertLine(line, allowMentions))
	}
	if fence != "" { // an unclosed block still renders as code
		out = append(out, "```")
	}
	return strings.Join(out, "\n")
}

func openingFence(trimmed string) string {
	for _, c := range []byte{'`', '~'} {
		n := 0
		for n < len(trimmed) && trimmed[n] == c {
			n++
		}
		if n >= 3 {
			if c == '`' && strings.Contains(trimmed[n:], "`") {
				return "" // ```code``` on one line is inline code
			}
			return trimmed[:n]
		}
	}
	return ""
}

func closesFence(trimmed, fence string) bool {
	n := 0
	for n < len(trimmed) && trimmed[n] == fence[0] {
		n++
	}
	return n >= len(fence) && strings.TrimSpace(trimmed[n:]) == ""
}

// The conversion's expressions are compiled on the first answer, not at
// start-up: every process links this package (parley version, config
// check, a replica without Slack), and compiled they are ~120 KB of heap
// kept for the process's life.
var tableSep = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)+\|?\s*$|^\s*\|\s*:?-{2,}:?\s*\|\s*$`)
})

// isTableStart reports a Markdown table header at lines[i]: a line with a
// pipe followed by a |---|---| separator line.
func isTableStart(lines []string, i int) bool {
	return i+1 < len(lines) && strings.Contains(lines[i], "|") && tableSep().MatchString(lines[i+1])
}

var (
	headingRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`) })
	hrRe      = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s{0,3}([-*_])(?:\s*([-*_])){2,}\s*$`) })
	quoteRe   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s{0,3}>\s?(.*)$`) })
	bulletRe  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)[-*+]\s+(.*)$`) })
	orderedRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)(\d{1,9})[.)]\s+(.*)$`) })
	taskRe    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\[([ xX])\]\s+`) })
)

// headingEmphasis drops the bold markers of a heading, which is bold as a
// whole.
var headingEmphasis = strings.NewReplacer("**", "", "__", "")

// blockStarts are the characters a heading, rule, quote or list item
// starts with (after indentation); a line that starts otherwise is only
// running text, and the block patterns need not be tried.
const blockStarts = "#-*_>+0123456789"

func convertLine(line string, allowMentions bool) string {
	if t := strings.TrimLeft(line, " \t\f\r\n"); t == "" || !strings.ContainsRune(blockStarts, rune(t[0])) {
		return inline(line, allowMentions)
	}
	if m := headingRe().FindStringSubmatch(line); m != nil {
		text := headingEmphasis.Replace(m[1])
		if strings.TrimSpace(text) == "" {
			return ""
		}
		return "*" + inline(text, allowMentions) + "*"
	}
	if m := hrRe().FindStringSubmatch(line); m != nil && !strings.ContainsFunc(strings.TrimSpace(line), func(r rune) bool { return r != rune(m[1][0]) && r != ' ' }) {
		return "──────────"
	}
	if m := quoteRe().FindStringSubmatch(line); m != nil {
		return ">" + " " + convertLine(m[1], allowMentions)
	}
	if m := bulletRe().FindStringSubmatch(line); m != nil {
		bullet := "•"
		if m[1] != "" {
			bullet = "◦"
		}
		rest := m[2]
		if t := taskRe().FindStringSubmatch(rest); t != nil {
			box := "☐"
			if t[1] != " " {
				box = "☑"
			}
			rest = box + " " + rest[len(t[0]):]
		}
		return m[1] + bullet + " " + inline(rest, allowMentions)
	}
	if m := orderedRe().FindStringSubmatch(line); m != nil {
		return m[1] + m[2] + ". " + inline(m[3], allowMentions)
	}
	return inline(line, allowMentions)
}

// Placeholders stand for finished pieces (code spans, links) while the rest
// of a line is escaped and formatted; they are private-use runes, which
// neither escaping nor the emphasis patterns touch.
const (
	phOpen  = '\uE000'
	phClose = '\uE001'
)

var phRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("\uE000(\\d+)\uE001") })

type placeholders []string

func (p *placeholders) add(s string) string {
	*p = append(*p, s)
	return string(phOpen) + strconv.Itoa(len(*p)-1) + string(phClose)
}

func (p placeholders) restore(s string) string {
	for i := 0; i < 4 && strings.ContainsRune(s, phOpen); i++ { // links nest one level
		s = phRe().ReplaceAllStringFunc(s, func(m string) string {
			n, _ := strconv.Atoi(m[len(string(phOpen)) : len(m)-len(string(phClose))])
			if n < len(p) {
				return p[n]
			}
			return ""
		})
	}
	return s
}

// inline converts one line of running text.
func inline(s string, allowMentions bool) string {
	s = strings.Map(func(r rune) rune {
		if r == phOpen || r == phClose {
			return -1
		}
		return r
	}, s)
	var ph placeholders
	var b strings.Builder
	for s != "" { // code spans first: their content is left as it is
		i := strings.IndexByte(s, '`')
		if i < 0 {
			b.WriteString(s)
			break
		}
		n := 1
		for i+n < len(s) && s[i+n] == '`' {
			n++
		}
		end := closingTicks(s[i+n:], n)
		if end < 0 {
			b.WriteString(s[:i+n])
			s = s[i+n:]
			continue
		}
		b.WriteString(s[:i])
		b.WriteString(ph.add(escaper.Replace(s[i : i+n+end+n])))
		s = s[i+n+end+n:]
	}
	return ph.restore(formatText(b.String(), &ph, allowMentions))
}

// closingTicks finds a run of exactly n backticks in s.
func closingTicks(s string, n int) int {
	for i := 0; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] == '`' {
			j++
		}
		if j-i == n {
			return i
		}
		i = j
	}
	return -1
}

var (
	linkRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`!?\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	})
	autolinkRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<((?:https?://|mailto:)[^>\s]+)>`) })
	mentionRe  = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`<(?:@[UW][A-Z0-9]+|#C[A-Z0-9]+|!(?:here|channel|everyone|subteam\^[A-Z0-9]+))(?:\|[^<>]*)?>`)
	})
	bareURLRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`https?://[^\s<>` + "`" + `]+`) })

	boldItalicRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*\*\*(\S(?:.*?\S)?)\*\*\*`) })
	boldRe       = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*\*(\S(?:.*?\S)?)\*\*`) })
	boldUnderRe  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`__(\S(?:.*?\S)?)__`) })
	strikeRe     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`~~(\S(?:.*?\S)?)~~`) })
	italicRe     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*(\S(?:[^*]*?\S)?)\*`) })
)

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// formatText escapes and formats text that holds no code.
func formatText(s string, ph *placeholders, allowMentions bool) string {
	if plainText(s) {
		return s
	}
	// Each pattern runs only on text holding what a match must: most
	// answers have no link, URL or emphasis of one kind or another, and a
	// pattern that cannot match still costs a scan of the whole text.
	if strings.Contains(s, "](") {
		s = formatLinks(s, ph, allowMentions)
	}
	if strings.Contains(s, "<http") || strings.Contains(s, "<mailto:") {
		s = autolinkRe().ReplaceAllStringFunc(s, func(m string) string {
			return ph.add("<" + escapeURL(m[1:len(m)-1]) + ">")
		})
	}
	if allowMentions && strings.Contains(s, "<") {
		s = mentionRe().ReplaceAllStringFunc(s, ph.add)
	}
	if strings.Contains(s, "http") {
		s = bareURLRe().ReplaceAllStringFunc(s, func(m string) string {
			url, tail := trimURL(m)
			return ph.add(escaper.Replace(url)) + tail
		})
	}
	s = escaper.Replace(s)
	// Temporary markers keep a converted bold from being read as italics.
	const bold, italic = "\x01", "\x02"
	if strings.Contains(s, "***") {
		s = wrap(s, boldItalicRe(), bold+italic, italic+bold)
	}
	if strings.Contains(s, "**") {
		s = wrap(s, boldRe(), bold, bold)
	}
	if strings.Contains(s, "__") {
		s = wrap(s, boldUnderRe(), bold, bold)
	}
	if strings.Contains(s, "~~") {
		s = wrap(s, strikeRe(), "~", "~")
	}
	if strings.Contains(s, "*") {
		s = wrap(s, italicRe(), italic, italic)
	}
	return markers.Replace(s)
}

// formatLinks turns s's Markdown links into mrkdwn's, each a placeholder.
func formatLinks(s string, ph *placeholders, allowMentions bool) string {
	return linkRe().ReplaceAllStringFunc(s, func(m string) string {
		sub := linkRe().FindStringSubmatch(m)
		label, target := sub[1], sub[2]
		if !isWebURL(target) {
			if label == "" {
				return ph.add(escaper.Replace(target))
			}
			return ph.add(formatText(label, ph, allowMentions) + " (" + escaper.Replace(target) + ")")
		}
		if strings.TrimSpace(label) == "" {
			return ph.add("<" + escapeURL(target) + ">")
		}
		return ph.add("<" + escapeURL(target) + "|" + formatText(label, ph, allowMentions) + ">")
	})
}

// markers turns formatText's temporary bold and italic markers into
// mrkdwn's.
var markers = strings.NewReplacer("\x01", "*", "\x02", "_")

// plainText reports text formatText would leave as it is: nothing to
// escape, no link, URL or emphasis marker (nor formatText's own
// temporary markers).
func plainText(s string) bool {
	return !strings.ContainsAny(s, "[<>&*_~\x01\x02") && !strings.Contains(s, "http")
}

// wrap replaces every match of re (whose group 1 is the content) with the
// content between open and close, adding a zero-width space where the
// marker would touch a letter or digit.
func wrap(s string, re *regexp.Regexp, open, close string) string {
	idx := re.FindAllStringSubmatchIndex(s, -1)
	if idx == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range idx {
		b.WriteString(s[last:m[0]])
		if r, _ := utf8.DecodeLastRuneInString(s[:m[0]]); m[0] > 0 && isWordRune(r) {
			b.WriteString("\u200b")
		}
		b.WriteString(open)
		b.WriteString(s[m[2]:m[3]])
		b.WriteString(close)
		if r, _ := utf8.DecodeRuneInString(s[m[1]:]); m[1] < len(s) && isWordRune(r) {
			b.WriteString("\u200b")
		}
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

func isWebURL(u string) bool {
	return strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "mailto:")
}

// escapeURL prepares a link target: &, <, > escaped like all text, and a
// pipe (which would end the target) percent-encoded.
func escapeURL(u string) string {
	return strings.ReplaceAll(escaper.Replace(u), "|", "%7C")
}

// trimURL keeps sentence punctuation after a bare URL out of it.
func trimURL(u string) (url, tail string) {
	end := len(u)
	for end > 0 {
		c := u[end-1]
		if strings.IndexByte(".,;:!?'\"", c) >= 0 || (c == ')' && strings.Count(u[:end], "(") < strings.Count(u[:end], ")")) {
			end--
			continue
		}
		break
	}
	return u[:end], u[end:]
}

var tokenRe = regexp.MustCompile(`<([^<>\n]*)>`)

// unescaper undoes Slack's escaping of message text; &amp; goes last.
var unescaper = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")

// botMentionGaps removes CleanText's marks of the bot's mentions, with a
// space beside each.
var botMentionGaps = strings.NewReplacer("\x00 ", "", " \x00", "", "\x00", "")

// CleanText turns the text of a Slack message into what the model reads:
// the mentions of the bot (botUser) are removed, labelled mentions and links
// become readable (<@U1|ana> → @ana, <#C1|general> → #general, <url|text> →
// text (url)), bare user and channel mentions stay as <@U…>/<#C…> so the
// model can use them in its answer, and &amp; &lt; &gt; are unescaped.
func CleanText(text, botUser string) string {
	text = tokenRe.ReplaceAllStringFunc(text, func(m string) string {
		inner := m[1 : len(m)-1]
		target, label, hasLabel := strings.Cut(inner, "|")
		switch {
		case botUser != "" && target == "@"+botUser:
			return "\x00"
		case strings.HasPrefix(target, "@"):
			if hasLabel && label != "" {
				return "@" + strings.TrimPrefix(label, "@")
			}
			return m
		case strings.HasPrefix(target, "#"):
			if hasLabel && label != "" {
				return "#" + label
			}
			return m
		case strings.HasPrefix(target, "!"):
			if hasLabel && label != "" {
				return label
			}
			switch target {
			case "!here", "!channel", "!everyone":
				return "@" + target[1:]
			}
			return ""
		case strings.HasPrefix(target, "mailto:"):
			if hasLabel && label != "" {
				return label
			}
			return strings.TrimPrefix(target, "mailto:")
		}
		if !hasLabel || label == "" || label == target || label == stripScheme(target) {
			return target
		}
		return label + " (" + target + ")"
	})
	text = botMentionGaps.Replace(text)
	return strings.TrimSpace(unescaper.Replace(text))
}

func stripScheme(u string) string {
	if _, rest, ok := strings.Cut(u, "://"); ok {
		return rest
	}
	return u
}

// mentions reports whether text mentions user.
func mentions(text, user string) bool {
	return user != "" && (strings.Contains(text, "<@"+user+">") || strings.Contains(text, "<@"+user+"|"))
}
