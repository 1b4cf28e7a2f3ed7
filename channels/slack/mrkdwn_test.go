package slack

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
)

const zwsp = "\u200b"

func TestToMrkdwn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello world", "hello world"},
		{"bold", "this is **bold** text", "this is *bold* text"},
		{"bold underscores", "this is __bold__ text", "this is *bold* text"},
		{"italic star", "this is *italic* text", "this is _italic_ text"},
		{"italic underscore stays", "this is _italic_ text", "this is _italic_ text"},
		{"bold and italic", "**bold** and *italic*", "*bold* and _italic_"},
		{"bold italic", "***both***", "*_both_*"},
		{"italic inside bold", "**very *much* so**", "*very _much_ so*"},
		{"strike", "~~gone~~ here", "~gone~ here"},
		{"lone stars are not emphasis", "2 * 3 * 4", "2 * 3 * 4"},
		{"link", "see [the docs](https://example.com/a?b=1&c=2) now", "see <https://example.com/a?b=1&amp;c=2|the docs> now"},
		{"link with bold label", "[**bold** link](https://example.com)", "<https://example.com|*bold* link>"},
		{"link pipe in url", "[x](https://example.com/a|b)", "<https://example.com/a%7Cb|x>"},
		{"image", "![diagram](https://example.com/d.png)", "<https://example.com/d.png|diagram>"},
		{"relative link", "[readme](README.md)", "readme (README.md)"},
		{"autolink", "<https://example.com>", "<https://example.com>"},
		{"bare url with underscores", "go to https://example.com/a_b_c_d.", "go to https://example.com/a_b_c_d."},
		{"bare url in parens", "(https://example.com/x)", "(https://example.com/x)"},
		{"escaping", "a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"},
		{"html is escaped", "<b>hi</b> <!here>", "&lt;b&gt;hi&lt;/b&gt; &lt;!here&gt;"},
		{"user and channel mentions escaped", "ask <@U123ABC> in <#C999|general>", "ask &lt;@U123ABC&gt; in &lt;#C999|general&gt;"},
		{"inline code keeps its text", "run `a < b && **c**` now", "run `a &lt; b &amp;&amp; **c**` now"},
		{"double backtick code", "``a ` b`` and **x**", "``a ` b`` and *x*"},
		{"unclosed backtick", "a ` b **c**", "a ` b *c*"},
		{"emphasis across code", "**see `x` now**", "*see `x` now*"},
		{"heading", "# Title", "*Title*"},
		{"heading with bold", "## The **big** one ##", "*The big one*"},
		{"heading with escaping", "### A & B", "*A &amp; B*"},
		{"bullets", "- one\n* two\n+ three", "• one\n• two\n• three"},
		{"nested bullets", "- one\n  - inner **b**", "• one\n  ◦ inner *b*"},
		{"task list", "- [ ] todo\n- [x] done", "• ☐ todo\n• ☑ done"},
		{"ordered", "1. first\n2) second", "1. first\n2. second"},
		{"quote", "> quoted **text**", "> quoted *text*"},
		{"rule", "above\n\n---\n\nbelow", "above\n\n──────────\n\nbelow"},
		{"code block keeps its text", "```go\nif a < b && c {\n\t**x**\n}\n```", "```\nif a &lt; b &amp;&amp; c {\n\t**x**\n}\n```"},
		{"tilde fence", "~~~\n<tag>\n~~~", "```\n&lt;tag&gt;\n```"},
		{"unclosed fence closed", "```\ncode <", "```\ncode &lt;\n```"},
		{"text around code block", "**Before**\n```\nx & y\n```\n*after*", "*Before*\n```\nx &amp; y\n```\n_after_"},
		{"one-line fence is inline code", "```a < b```", "```a &lt; b```"},
		{"table becomes code", "| a | b |\n|---|---|\n| 1 & 2 | **3** |\n\nafter", "```\n| a | b |\n|---|---|\n| 1 &amp; 2 | **3** |\n```\n\nafter"},
		{"CJK bold needs separators", "这是**重要**的内容", "这是" + zwsp + "*重要*" + zwsp + "的内容"},
		{"CJK bold before punctuation", "**注意**：请看", "*注意*：请看"},
		{"CJK italic and strike", "日本語の*強調*と~~削除~~です", "日本語の" + zwsp + "_強調_" + zwsp + "と" + zwsp + "~削除~" + zwsp + "です"},
		{"CJK heading list link", "# 标题\n- 项目一\n[文档](https://example.com/文档)", "*标题*\n• 项目一\n<https://example.com/文档|文档>"},
		{"CJK code keeps its text", "`代码 <x>`", "`代码 &lt;x&gt;`"},
		{"latin intraword", "foo**bar**baz", "foo" + zwsp + "*bar*" + zwsp + "baz"},
		{"crlf", "a\r\n**b**", "a\n*b*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ToMrkdwn(tt.in, false); got != tt.want {
				t.Errorf("ToMrkdwn(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestSlackOutputNeutralisesMentions: a broadcast or a mention the model
// writes — in running text, a code span, a fenced block, a table, a link
// label or a heading — never reaches Slack as a control sequence unless the
// operator allows mentions; then only running text keeps them.
func TestSlackOutputNeutralisesMentions(t *testing.T) {
	t.Parallel()
	seqs := []string{"<!channel>", "<!here>", "<!everyone>", "<!here|here>", "<@U123ABC>", "<@W1|ana>", "<#C999|general>", "<!subteam^S1|@ops>"}
	forms := map[string]string{
		"text":         "hey %s look",
		"code span":    "run `%s` now",
		"double ticks": "run ``%s`` now",
		"fenced block": "```\n%s\n```",
		"tilde block":  "~~~\n%s\n~~~",
		"one-line":     "```%s```",
		"table":        "| a | b |\n|---|---|\n| %s | 2 |",
		"link label":   "[%s](https://example.com)",
		"heading":      "# %s",
		"bullet":       "- %s",
		"quote":        "> %s",
		"bold":         "**%s**",
		"unclosed":     "```\n%s",
	}
	for name, form := range forms {
		for _, seq := range seqs {
			in := strings.ReplaceAll(form, "%s", seq)
			out := ToMrkdwn(in, false)
			if strings.Contains(out, "<@") || strings.Contains(out, "<!") || strings.Contains(out, "<#") {
				t.Errorf("%s: ToMrkdwn(%q) = %q still mentions", name, in, out)
			}
			for i, chunk := range channels.Split(out, 8) {
				if strings.Contains(chunk, "<@") || strings.Contains(chunk, "<!") || strings.Contains(chunk, "<#") {
					t.Errorf("%s: chunk %d of %q mentions: %q", name, i, in, chunk)
				}
			}
		}
	}
	allowed := ToMrkdwn("ask <@U123ABC> and <!here>, not `<!channel>`", true)
	if want := "ask <@U123ABC> and <!here>, not `&lt;!channel&gt;`"; allowed != want {
		t.Errorf("with mentions allowed: %q, want %q", allowed, want)
	}
}

func TestLongRepliesSplitOutsideCodeBlocks(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := 0; i < 40; i++ {
		b.WriteString("A paragraph of **prose** that goes on for a while, long enough to need several messages.\n\n")
	}
	b.WriteString("```\n")
	for i := 0; i < 30; i++ {
		b.WriteString("code line <keep> & untouched\n")
	}
	b.WriteString("```\n\nThe end.")
	chunks := channels.Split(ToMrkdwn(b.String(), false), MaxMessageBytes)
	if len(chunks) < 2 {
		t.Fatalf("got %d chunks, want several", len(chunks))
	}
	for i, c := range chunks {
		if len(c) > MaxMessageBytes {
			t.Errorf("chunk %d is %d bytes", i, len(c))
		}
		if strings.Count(c, "```")%2 != 0 {
			t.Errorf("chunk %d has an unbalanced fence:\n%s", i, c)
		}
		if strings.Contains(c, "**") {
			t.Errorf("chunk %d still has Markdown bold", i)
		}
	}
	if all := strings.Join(chunks, "\n"); !strings.Contains(all, "code line &lt;keep&gt; &amp; untouched") {
		t.Error("code block content was changed")
	}
}

func TestCleanText(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"mention stripped", "<@UBOT> hello", "hello"},
		{"labelled mention stripped", "<@UBOT|parley> hello", "hello"},
		{"mention in the middle", "hey <@UBOT> what's up", "hey what's up"},
		{"command after mention", "<@UBOT> /skill list", "/skill list"},
		{"other user kept", "<@UBOT> ask <@U123> about it", "ask <@U123> about it"},
		{"other user with label", "ping <@U123|ana>", "ping @ana"},
		{"channel", "see <#C1|general> and <#C2>", "see #general and <#C2>"},
		{"broadcast", "<!here> look", "@here look"},
		{"subteam", "<!subteam^S1|@ops> help", "@ops help"},
		{"link", "read <https://example.com/x|the doc>", "read the doc (https://example.com/x)"},
		{"bare link", "read <https://example.com/x>", "read https://example.com/x"},
		{"auto link", "<https://example.com|example.com>", "https://example.com"},
		{"mailto", "<mailto:a@b.c|a@b.c>", "a@b.c"},
		{"unescape", "a &lt; b &amp;&amp; c &gt; d &amp;lt;", "a < b && c > d &lt;"},
		{"newlines kept", "<@UBOT> line one\n```\ncode\n```", "line one\n```\ncode\n```"},
		{"unknown bot id", "<@UBOT> hi", "<@UBOT> hi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bot := "UBOT"
			if tt.name == "unknown bot id" {
				bot = ""
			}
			if got := CleanText(tt.in, bot); got != tt.want {
				t.Errorf("CleanText(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
