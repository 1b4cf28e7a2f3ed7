package channels

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCapReply(t *testing.T) {
	long := strings.Repeat("word ", 40_000) // 200,000 characters
	got, cut := CapReply(long, 40_000, 0, nil)
	if !cut || utf8.RuneCountInString(got) > 40_000+len("\n\n… answer cut at 40000 characters") || !strings.HasSuffix(got, "characters") {
		t.Fatalf("cut=%v, %d characters, ends %q", cut, utf8.RuneCountInString(got), got[max(len(got)-60, 0):])
	}
	if !strings.HasSuffix(got, "word\n\n… answer cut at 39999 characters") {
		t.Errorf("not cut at a word break with its note: %q", got[len(got)-60:])
	}

	short := "a short answer"
	if got, cut := CapReply(short, 40_000, 10, func(s string) int { return len(Split(s, 100)) }); cut || got != short {
		t.Errorf("a short answer changed: %q, %v", got, cut)
	}

	// Posts: 100-byte posts, at most 3.
	posts := func(s string) int { return len(Split(s, 100)) }
	got, cut = CapReply(strings.Repeat("line of text\n", 200), 0, 3, posts)
	if !cut || posts(got) > 3 || posts(got) < 3 || !strings.Contains(got, "answer cut at") {
		t.Fatalf("cut=%v, %d posts: %q", cut, posts(got), got)
	}

	// A cut inside a code block closes it.
	code := "intro\n\n```go\n" + strings.Repeat("x := 1\n", 100) + "```\n"
	got, _ = CapReply(code, 120, 0, nil)
	if strings.Count(got, "```") != 2 || !strings.Contains(got, "x := 1\n```\n\n… answer cut at") {
		t.Errorf("open code block not closed: %q", got)
	}

	// Not one rune is cut in half, whatever the cap.
	cjk := strings.Repeat("你好世界", 100)
	for n := 1; n < 50; n++ {
		if got, _ := CapReply(cjk, n, 0, nil); !utf8.ValidString(got) {
			t.Fatalf("cap %d cut inside a rune: %q", n, got)
		}
	}
}
