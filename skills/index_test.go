package skills

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestIndex(t *testing.T) {
	many := func(n int, desc string) []*Skill {
		var out []*Skill
		for i := range n {
			out = append(out, &Skill{Name: fmt.Sprintf("s%02d", i), Description: desc})
		}
		return out
	}
	tests := []struct {
		name        string
		skills      []*Skill
		visible     func(*Skill) bool
		wantEntries []string // names in order
		wantOmitted []string
		check       func(t *testing.T, text string)
	}{
		{name: "empty", skills: nil},
		{
			name:        "order, hidden and invisible",
			skills:      []*Skill{{Name: "b", Description: "B."}, {Name: "a", Description: "A."}, {Name: "c", Description: "C.", DisableModelInvocation: true}, {Name: "d", Description: "D."}},
			visible:     func(s *Skill) bool { return s.Name != "d" },
			wantEntries: []string{"a", "b"},
		},
		{name: "nothing visible", skills: []*Skill{{Name: "a", Description: "A."}}, visible: func(*Skill) bool { return false }},
		{
			name:        "multi-line description flattened",
			skills:      []*Skill{{Name: "a", Description: "line one\n  line two\tend"}},
			wantEntries: []string{"a"},
			check: func(t *testing.T, text string) {
				if !strings.Contains(text, "- a: line one line two end\n") {
					t.Errorf("text %q", text)
				}
			},
		},
		{
			name:        "description cut at 500 code points (CJK)",
			skills:      []*Skill{{Name: "cjk", Description: strings.Repeat("汉", 600)}},
			wantEntries: []string{"cjk"},
			wantOmitted: []string{"cjk"},
			check: func(t *testing.T, text string) {
				line := entryLine(text, "cjk")
				desc := strings.TrimPrefix(line, "- cjk: ")
				if utf8.RuneCountInString(desc) != IndexMaxDescription || !strings.HasSuffix(desc, "…") {
					t.Errorf("desc %d runes: %q", utf8.RuneCountInString(desc), desc[len(desc)-10:])
				}
			},
		},
		{
			name:        "500 emoji fit as code points, not bytes",
			skills:      []*Skill{{Name: "emoji", Description: strings.Repeat("😀", 500)}},
			wantEntries: []string{"emoji"},
		},
		{
			name:        "20-skill cap",
			skills:      many(25, "x"),
			wantEntries: names(many(20, "x")),
			wantOmitted: []string{"s20", "s21", "s22", "s23", "s24"},
		},
		{
			name:   "4096-byte cap drops whole entries",
			skills: many(10, strings.Repeat("é", 450)), // ~913 bytes per entry
			check: func(t *testing.T, text string) {
				if len(text) > IndexMaxBytes || !utf8.ValidString(text) {
					t.Errorf("len %d valid %v", len(text), utf8.ValidString(text))
				}
				if strings.Count(text, "\n- ") != 4 {
					t.Errorf("entries: %d", strings.Count(text, "\n- "))
				}
			},
			wantEntries: []string{"s00", "s01", "s02", "s03"},
			wantOmitted: []string{"s04", "s05", "s06", "s07", "s08", "s09"},
		},
		{
			name:        "a short entry after an oversized one still fits",
			skills:      []*Skill{{Name: "a", Description: strings.Repeat("é", 499)}, {Name: "b", Description: strings.Repeat("é", 499)}, {Name: "c", Description: strings.Repeat("é", 499)}, {Name: "d", Description: strings.Repeat("é", 499)}, {Name: "e", Description: strings.Repeat("x", 499)}, {Name: "f", Description: "short"}},
			wantEntries: []string{"a", "b", "c", "e", "f"},
			wantOmitted: []string{"d"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCatalog(tc.skills...)
			text, omitted := c.Index(tc.visible)
			if len(tc.wantEntries) == 0 {
				if text != "" {
					t.Fatalf("want empty, got %q", text)
				}
			} else if !strings.HasPrefix(text, indexHeader) || !strings.Contains(indexHeader, "load_skill(name)") || !strings.Contains(indexHeader, "find_skills(query)") {
				t.Fatalf("header missing: %q", text)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n")[min(1, len(text)):] {
				n, _, _ := strings.Cut(strings.TrimPrefix(l, "- "), ":")
				got = append(got, n)
			}
			if len(tc.wantEntries) > 0 && !reflect.DeepEqual(got, tc.wantEntries) {
				t.Errorf("entries %v, want %v", got, tc.wantEntries)
			}
			if !reflect.DeepEqual(omitted, tc.wantOmitted) {
				t.Errorf("omitted %v, want %v", omitted, tc.wantOmitted)
			}
			if len(text) > IndexMaxBytes {
				t.Errorf("index %d bytes", len(text))
			}
			if tc.check != nil {
				tc.check(t, text)
			}
			again, _ := newCatalog(tc.skills...).Index(tc.visible)
			if again != text {
				t.Error("index not byte-identical for the same input")
			}
		})
	}
}

func entryLine(text, name string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "- "+name+": ") {
			return l
		}
	}
	return ""
}

func TestSummary(t *testing.T) {
	c := newCatalog(
		&Skill{Name: "web-access", Description: "Web.", Source: SourceUser, Replaced: SourceBuiltin},
		&Skill{Name: "code-review", Description: "Review.", Source: SourceWorkspace},
		&Skill{Name: "trusted-one", Description: "T.", Source: SourceWorkspace},
	)
	out := c.Summary(map[string]bool{"code-review": true}, func(s *Skill) bool { return s.Name == "trusted-one" }, 1234)
	for _, want := range []string{"Skills loaded (3)", "user (replaces builtin)", "description 4 chars", "disabled, untrusted", "enabled, trusted", "2/3 enabled", "index 1234 bytes"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}
