package skills

import (
	"errors"
	"fmt"
	"path/filepath"
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
			if !strings.Contains(lines[2], fmt.Sprintf("load_skill(name=%q, file=", tc.s.Name)) {
				t.Errorf("folder line %q", lines[2])
			}
			// The model is never told where the server keeps the skill.
			if strings.Contains(text, tc.s.Dir) || strings.Contains(text, filepath.Dir(tc.s.Dir)) {
				t.Errorf("injection reveals the host path %q:\n%s", tc.s.Dir, text[:min(len(text), 300)])
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

// fenceLines counts the lines of text that open or close a code block.
func fenceLines(text string) int {
	n := 0
	for _, l := range strings.Split(text, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			n++
		}
	}
	return n
}

// pages follows the continue hints of a skill body from offset 0 and
// returns each page without its hint.
func pages(t *testing.T, s *Skill) []string {
	t.Helper()
	var out []string
	for off := 0; ; {
		p, err := SkillFileChunk(s, off)
		if err != nil {
			t.Fatal(err)
		}
		m := hintRe.FindStringSubmatch(p)
		if m == nil {
			return append(out, p)
		}
		out = append(out, strings.TrimSuffix(p, m[0]))
		fmt.Sscan(m[3], &off)
	}
}

func TestPageCutNeverLandsInsideACodeBlock(t *testing.T) {
	prose := strings.Repeat("Some prose about the deployment steps.\n", 100) // 3900 bytes
	block := "```bash\n" + strings.Repeat("kubectl apply -f deploy/ --namespace production\n", 40) + "```\n"
	huge := "  ~~~~python\n" + strings.Repeat("print('a line of a very long script')\n", 400) + "  ~~~~\n"
	tests := []struct {
		name string
		body string
	}{
		{"block straddling the 5 KiB mark", prose + block + prose},
		{"two blocks", prose + "```\nshort\n```\n" + block + prose + block},
		{"inline triple backticks are no fence", strings.Repeat("use ```x``` inline\n", 400) + block},
		{"block longer than a page", "Intro.\n" + huge + prose},
		{"unclosed block at the end", prose + "```sh\n" + strings.Repeat("echo never closed\n", 400)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Skill{Name: "fenced", Body: tc.body}
			ps := pages(t, s)
			if len(ps) < 2 {
				t.Fatalf("body of %d bytes fit one page", len(tc.body))
			}
			for i, p := range ps[:len(ps)-1] {
				if n := fenceLines(p); n%2 != 0 {
					t.Errorf("page %d ends inside a code block (%d fence lines):\n…%s", i, n, p[max(0, len(p)-200):])
				}
				if len(p) > BodyChunkBytes+200 {
					t.Errorf("page %d is %d bytes", i, len(p))
				}
			}
			// The raw pages still reassemble the body exactly.
			if got := strings.Join(readAll(t, tc.body), ""); got != tc.body {
				t.Error("raw pages do not reassemble the body")
			}
		})
	}
	// A block cut because it alone is longer than a page reopens with its
	// language on the next page.
	ps := pages(t, &Skill{Name: "fenced", Body: huge + prose})
	if !strings.HasPrefix(ps[1], "  ~~~~python\n") || !strings.HasSuffix(ps[0], "~~~~\n") {
		t.Errorf("long block not closed and reopened:\n…%s\n---\n%s…", ps[0][len(ps[0])-80:], ps[1][:80])
	}
}
