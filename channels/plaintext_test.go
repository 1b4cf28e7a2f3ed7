package channels_test

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
)

func TestPlainText(t *testing.T) {
	for _, tt := range []struct{ name, md, want string }{
		{"heading", "## Title ##\ntext", "Title\ntext"},
		{"emphasis", "**bold**, *it*, _it_, __b__, ~~gone~~ and *a* *b*", "bold, it, it, b, gone and a b"},
		{"nested", "**_both_**", "both"},
		{"snake_case and arithmetic stay", "load_skill and 2 * 3 * 4", "load_skill and 2 * 3 * 4"},
		{"link", "[the docs](https://x.y/z) and <https://a.b>", "the docs (https://x.y/z) and https://a.b"},
		{"link that is its url", "[https://x.y](https://x.y)", "https://x.y"},
		{"image", "![a chart](https://x.y/c.png)", "a chart (https://x.y/c.png)"},
		{"bullets", "- one\n* two\n  + three\n- [x] done", "• one\n• two\n  • three\n• done"},
		{"ordered list stays", "1. first\n2. second", "1. first\n2. second"},
		{"code span keeps its text", "run `**not bold**` now", "run **not bold** now"},
		{"fence", "Run:\n```sh\nmake **all**\n```\ndone", "Run:\n    make **all**\ndone"},
		{"tilde fence", "~~~\nx\n~~~", "    x"}, // only blank lines are trimmed, not the code's indentation
		{"table", "| a | **b** |\n|---|---|\n| 1 | 2 |", "| a | b |\n|---|---|\n| 1 | 2 |"},
		{"rule", "a\n\n---\n\nb", "a\n\n" + strings.Repeat("─", 20) + "\n\nb"},
		{"escape", `a \# b`, "a # b"},
		{"blank ends", "\n\nhi\n\n", "hi"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := channels.PlainText(tt.md)
			if got != tt.want {
				t.Errorf("PlainText(%q) =\n%q\nwant\n%q", tt.md, got, tt.want)
			}
		})
	}
}

// TestSettledPrintsOnlyWhatStays: the settled part of a line printed as
// it arrives is always the start of the line's rendering once whole.
func TestSettledPrintsOnlyWhatStays(t *testing.T) {
	for _, line := range []string{
		"# A heading with words", "- a bullet with **bold words** in it", "see [the docs](https://x.y/z) now",
		"plain words all the way", "an *emphasis over words* here", "`code span with words` then", "```go",
	} {
		var r channels.PlainTextRenderer
		whole, _ := r.Line(line)
		for i := range len(line) {
			var p channels.PlainTextRenderer
			if s := p.Settled(line[:i]); !strings.HasPrefix(whole, s) {
				t.Errorf("Settled(%q) = %q, not the start of %q", line[:i], s, whole)
			}
		}
	}
}
