package approval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxArgsShown is how many characters of a call's arguments a prompt
// shows; the rest is cut, with a note saying how much.
const MaxArgsShown = 600

// Args renders a call's arguments for people: indented JSON when they are
// JSON, cut at MaxArgsShown characters, and made safe to put inside a code
// block of any platform: no fence can be closed from inside, and no
// mention (Slack's <@U…>, <!channel>, Feishu's <at …>, a bare @all) can
// fire, since neither '<' nor '@' is left as typed.
func Args(raw string) string {
	text := indent(raw)
	if n := utf8.RuneCountInString(text); n > MaxArgsShown {
		cut := []rune(text)[:MaxArgsShown]
		text = string(cut) + fmt.Sprintf("\n… (%d more characters not shown)", n-MaxArgsShown)
	}
	return neutral.Replace(text)
}

// FullArgs is Args without the cut, for /show CODE.
func FullArgs(raw string) string { return neutral.Replace(indent(raw)) }

// indent indents JSON arguments; anything else stays as it is.
func indent(raw string) string {
	var buf bytes.Buffer
	if json.Indent(&buf, []byte(raw), "", "  ") == nil {
		return buf.String()
	}
	return raw
}

// Inert is s with every character that could end a code block or start a
// mention swapped for a look-alike: how others' words (a tool's, a
// server's) are shown to people.
func Inert(s string) string { return neutral.Replace(s) }

// neutral swaps the characters that could end a code block or start a
// mention for look-alikes.
var neutral = strings.NewReplacer(
	"`", "ˋ", // modifier grave: a fence needs the real backtick
	"<", "‹", ">", "›",
	"@", "＠", // fullwidth: no platform reads it as a mention
	"&", "＆", // Slack's &lt; entities
)

// Prompt is the text prompt of a pending request: the tool, its arguments
// and how to decide, for platforms without buttons (and as the text of a
// message with buttons).
func Prompt(r Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Approval needed: I'd like to run the tool %s with:\n", Args(r.Tool))
	fmt.Fprintf(&b, "```\n%s\n```\n", Args(r.Args))
	if utf8.RuneCountInString(indent(r.Args)) > MaxArgsShown {
		fmt.Fprintf(&b, "`/show %s` shows the arguments in full. ", r.Code)
	}
	fmt.Fprintf(&b, "An approver can reply `/approve %s` to run it or `/deny %s` to refuse; `/cancel` drops it. It expires in %s.", r.Code, r.Code, wait(time.Until(r.Expires)))
	return b.String()
}

// wait renders a timeout the way people say it.
func wait(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int(d/time.Hour), "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return plural(int(d/time.Minute), "minute")
	case d >= time.Minute:
		return d.String()
	}
	return plural(int(max(d/time.Second, 1)), "second")
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
