package skills

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

var hintRe = regexp.MustCompile(`\[truncated: continue with load_skill\(name="([a-z0-9-]+)", file="([^"]+)", offset=(\d+)\)\]$`)

func TestInjectionRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		s    *Skill
	}{
		{"short", &Skill{Name: "web-access", Source: SourceBuiltin, Dir: "/home/u/.parley/skills-cache/web-access", Body: "# Web\nDo it.\n"}},
		{"empty body", &Skill{Name: "x", Source: SourceUser, Dir: "/d/x"}},
		{"long", &Skill{Name: "long-one", Source: SourceWorkspace, Dir: "/w/long-one", Body: strings.Repeat("line of text\n", 1000)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := InjectionText(tc.s)
			lines := strings.Split(text, "\n")
			if lines[0] != InjectionMarker {
				t.Fatalf("first line %q", lines[0])
			}
			if want := fmt.Sprintf("## Loaded skill: %s (source: %s)", tc.s.Name, tc.s.Source); lines[1] != want {
				t.Errorf("heading %q", lines[1])
			}
			if !strings.Contains(lines[2], tc.s.Dir) || !strings.Contains(lines[2], fmt.Sprintf("load_skill(name=%q, file=", tc.s.Name)) {
				t.Errorf("directory line %q", lines[2])
			}
			name, ok := ParseInjection(text)
			if !ok || name != tc.s.Name {
				t.Errorf("ParseInjection = %q, %v", name, ok)
			}
			if name, ok := ParseInjection(strings.ReplaceAll(text, "\n", "\r\n")); !ok || name != tc.s.Name {
				t.Errorf("CRLF ParseInjection = %q, %v", name, ok)
			}
			truncated := len(tc.s.Body) > BodyChunkBytes
			if hintRe.MatchString(text) != truncated {
				t.Errorf("hint present=%v, want %v", hintRe.MatchString(text), truncated)
			}
		})
	}
}

func TestParseInjectionRejects(t *testing.T) {
	for _, content := range []string{
		"",
		"hello",
		"## Loaded skill: x (source: user)\n" + InjectionMarker,
		InjectionMarker,
		InjectionMarker + "\n## Loaded skill: Bad Name (source: user)\n",
		InjectionMarker + "\n## Loaded skill: x\n",
		"quote: " + InjectionMarker + "\n## Loaded skill: x (source: user)\n",
	} {
		if name, ok := ParseInjection(content); ok {
			t.Errorf("ParseInjection(%q) = %q, true", content, name)
		}
	}
}

// readAll pages through text with page() and returns the chunks.
func readAll(t *testing.T, text string) []string {
	t.Helper()
	var chunks []string
	for off := 0; off < len(text); {
		chunk, next, err := page(text, off)
		if err != nil {
			t.Fatal(err)
		}
		if next <= off {
			t.Fatalf("no progress at %d", off)
		}
		chunks = append(chunks, chunk)
		off = next
	}
	return chunks
}

func TestPaging(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{"empty", ""},
		{"exactly one chunk", strings.Repeat("a", BodyChunkBytes-1) + "\n"},
		{"lines", strings.Repeat("0123456789abcdef\n", 1000)},
		{"cjk lines", strings.Repeat("中文内容一行\n", 2000)},
		{"one huge line of CJK", strings.Repeat("汉", 6000)},
		{"one huge line of emoji then lines", strings.Repeat("😀", 3000) + "\n" + strings.Repeat("tail\n", 10)},
		{"no trailing newline", strings.Repeat("x\n", 4000) + "end"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chunks := readAll(t, tc.body)
			if got := strings.Join(chunks, ""); got != tc.body {
				t.Fatalf("concatenated chunks differ from body (%d vs %d bytes)", len(got), len(tc.body))
			}
			for i, c := range chunks {
				if len(c) > BodyChunkBytes || !utf8.ValidString(c) {
					t.Errorf("chunk %d: %d bytes valid=%v", i, len(c), utf8.ValidString(c))
				}
				last := i == len(chunks)-1
				hasLineBreak := strings.Contains(c, "\n")
				if !last && hasLineBreak && !strings.HasSuffix(c, "\n") {
					t.Errorf("chunk %d not cut on a line boundary", i)
				}
			}
		})
	}
}

func TestSkillFileChunkFollowsHints(t *testing.T) {
	s := &Skill{Name: "long-one", Body: strings.Repeat("a line of the runbook\n", 800) + "last"}
	first := InjectionText(s)
	m := hintRe.FindStringSubmatch(first)
	if m == nil {
		t.Fatal("no hint in injection")
	}
	bodyStart := strings.Index(first, "\n\n") + 2
	got := strings.TrimSuffix(first[bodyStart:], m[0])
	for m != nil {
		if m[1] != s.Name || m[2] != "SKILL.md" {
			t.Fatalf("hint %q", m[0])
		}
		var off int
		fmt.Sscan(m[3], &off)
		if off != len(got) {
			t.Fatalf("hint offset %d, but %d bytes were shown", off, len(got))
		}
		out, err := SkillFileChunk(s, off)
		if err != nil {
			t.Fatal(err)
		}
		m = hintRe.FindStringSubmatch(out)
		if m != nil {
			out = strings.TrimSuffix(out, m[0])
		}
		got += out
	}
	if got != s.Body {
		t.Error("pages do not reassemble the body")
	}
	for _, off := range []int{-1, len(s.Body) + 1} {
		if _, err := SkillFileChunk(s, off); !errors.Is(err, ErrBadOffset) {
			t.Errorf("offset %d: err %v", off, err)
		}
	}
}
