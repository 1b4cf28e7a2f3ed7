package slack

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parleyhq/parley/channels"
)

// FuzzToMrkdwn: whatever the model writes, the mrkdwn never carries a
// broadcast or mention (mentions not allowed), stays valid UTF-8, and
// splits into chunks within Slack's size, none blank.
func FuzzToMrkdwn(f *testing.F) {
	for _, s := range []string{"hi <!channel>", "`<!here>`", "```\n<@U1>\n```", "| a |\n|---|\n| <#C1> |", "[<!everyone>](https://x)", "**b** *i* ~~s~~", "\f   ", "<https://a|b>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		out := ToMrkdwn(md, false)
		for _, bad := range []string{"<!", "<@", "<#"} {
			if strings.Contains(out, bad) {
				t.Fatalf("ToMrkdwn(%q) = %q contains %q", md, out, bad)
			}
		}
		if utf8.ValidString(md) && !utf8.ValidString(out) {
			t.Fatalf("ToMrkdwn(%q) is not valid UTF-8: %q", md, out)
		}
		for _, c := range channels.Split(out, MaxMessageBytes) {
			if strings.TrimSpace(c) == "" || (len(c) > MaxMessageBytes && utf8.RuneCountInString(c) > 1) {
				t.Fatalf("bad chunk %q", c)
			}
		}
	})
}

// FuzzCleanText: any Slack message text becomes model input without a
// panic, valid UTF-8 in, valid UTF-8 out.
func FuzzCleanText(f *testing.F) {
	for _, s := range []string{"<@UBOT> hi", "<!here|here>", "<https://a|b>", "&lt;&amp;&gt;", "<mailto:a@b|a>", "<#C1|g>", "<<@U1>>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		out := CleanText(text, "UBOT")
		if utf8.ValidString(text) && !utf8.ValidString(out) {
			t.Fatalf("CleanText(%q) = %q is not valid UTF-8", text, out)
		}
	})
}
