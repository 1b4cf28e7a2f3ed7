package channels

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestSplit(t *testing.T) {
	code := "```go\n" + strings.Repeat("fmt.Println(\"x\")\n", 10) + "```"
	tests := []struct {
		name  string
		text  string
		limit int
		want  int // chunks
	}{
		{"short", "hello", 100, 1},
		{"empty", "   ", 100, 0},
		{"paragraphs", "aaaa aaaa\n\nbbbb bbbb\n\ncccc cccc", 20, 2},
		{"code block kept whole", "intro\n\n" + code + "\n\noutro", len(code) + 2, 3},
		{"long code block re-fenced", code, 60, 4},
		{"cjk never cut inside a rune", strings.Repeat("你好世界", 50), 31, 20},
		{"one long line", strings.Repeat("word ", 100), 50, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Split(tt.text, tt.limit)
			if len(got) != tt.want {
				t.Fatalf("%d chunks, want %d: %q", len(got), tt.want, got)
			}
			for _, c := range got {
				if len(c) > tt.limit {
					t.Errorf("chunk of %d bytes over the limit %d: %q", len(c), tt.limit, c)
				}
				if !utf8.ValidString(c) {
					t.Errorf("chunk cut inside a rune: %q", c)
				}
				if strings.Count(c, "```")%2 != 0 {
					t.Errorf("chunk leaves a code fence open: %q", c)
				}
			}
			joined := strings.Join(got, "")
			for _, word := range []string{"intro", "outro", "fmt.Println"} {
				if strings.Contains(tt.text, word) && !strings.Contains(joined, word) {
					t.Errorf("lost %q", word)
				}
			}
		})
	}
}

func TestReadBody(t *testing.T) {
	for _, tt := range []struct {
		body    string
		limit   int64
		wantErr bool
	}{{"abc", 3, false}, {"abcd", 3, true}} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
		r.ContentLength = -1 // unknown length: the reader must still stop
		b, err := ReadBody(r, tt.limit)
		if (err != nil) != tt.wantErr || (err == nil && string(b) != tt.body) {
			t.Errorf("ReadBody(%q, %d) = %q, %v", tt.body, tt.limit, b, err)
		}
	}
}

// TestSplitNeverEmitsBlankChunks: whitespace the trimming does not know
// (a no-break or ideographic space, a form feed between paragraphs) is
// never sent on its own — Slack and Feishu refuse an empty message.
func TestSplitNeverEmitsBlankChunks(t *testing.T) {
	for _, text := range []string{"\f   ", "\u00a0\u00a0", "\u3000", "\u200b", "a\n\n\f   \n\nb", "```\n\n```", strings.Repeat("x", 20) + "\n\n\u00a0\u00a0\u00a0\n\n" + strings.Repeat("y", 20)} {
		for _, limit := range []int{0, 1, 3, 8, 20, 100} {
			for i, c := range Split(text, limit) {
				if strings.TrimFunc(c, func(r rune) bool { return unicode.IsSpace(r) || r == '\u200b' || r == '\ufeff' }) == "" {
					t.Errorf("Split(%q, %d) chunk %d is blank: %q", text, limit, i, c)
				}
			}
		}
	}
}

// TestSplitFencedBlocks: the parts of an oversized code block keep its own
// fence and info string; a block that is only fences and an info string, or
// a limit too small for the fences, is cut plainly rather than dropped.
func TestSplitFencedBlocks(t *testing.T) {
	body := strings.Repeat("y := 2\n", 12)
	got := Split("intro\n````md\n"+body+"```go\n````\noutro", 60)
	if len(got) < 4 || got[0] != "intro" || got[len(got)-1] != "outro" {
		t.Fatalf("chunks %q: want intro, the re-fenced parts, outro", got)
	}
	for _, c := range got[1 : len(got)-1] {
		if !strings.HasPrefix(c, "````md\n") || !strings.HasSuffix(c, "\n````") || len(c) > 60 {
			t.Errorf("part %q is not re-fenced with ````md … ```` within 60 bytes", c)
		}
	}
	if joined := strings.Join(got, "\n"); strings.Count(joined, "y := 2") != 12 || !strings.Contains(joined, "```go") {
		t.Errorf("lines lost: %q", got)
	}

	for _, tt := range []struct {
		text  string
		limit int
	}{
		{"```0000000000\n```", 8},
		{"```0000000000\n```", 16},
		{"```python\nprint(1)\nprint(2)\n```", 10},
		{"~~~\n" + strings.Repeat("z", 30) + "\n~~~", 12},
	} {
		got := Split(tt.text, tt.limit)
		joined := strings.Join(got, "")
		for _, want := range []string{"0000000000", "python", "print(1)", "print(2)", strings.Repeat("z", 30)} {
			if strings.Contains(tt.text, want) && !strings.Contains(strings.ReplaceAll(strings.Join(got, "\n"), "\n", ""), want) {
				t.Errorf("Split(%q, %d) = %q lost %q", tt.text, tt.limit, got, want)
			}
		}
		if joined == "" {
			t.Errorf("Split(%q, %d) lost the text", tt.text, tt.limit)
		}
		for _, c := range got {
			if len(c) > tt.limit {
				t.Errorf("Split(%q, %d): chunk %q over the limit", tt.text, tt.limit, c)
			}
		}
	}
}
