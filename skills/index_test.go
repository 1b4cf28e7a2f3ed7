package skills

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parleyhq/parley/skills/builtin"
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
				l, ok := strings.CutPrefix(l, "- ")
				if !ok {
					continue // the line counting the skills left out
				}
				n, _, _ := strings.Cut(l, ":")
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
	out := c.Summary(SummaryState{Disabled: map[string]bool{"code-review": true}, Trusted: func(s *Skill) bool { return s.Name == "trusted-one" }, IndexBytes: 1234, Indexed: map[string]bool{"web-access": true}})
	for _, want := range []string{"Skills loaded (3)", "user (replaces builtin)", "description 4 chars", "disabled, untrusted", "enabled, trusted, find_skills only", "enabled, indexed", "2/3 enabled", "index 1234 bytes", "The index lists 1 skill(s)", IndexRule} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// An untrusted workspace skill is find_skills only whatever the index's
// room, said once; load counts are shown, and the most loaded skills a
// pin would move up are suggested as skills.index after the current pins.
func TestSummaryMarksUntrustedAndAdvisesPins(t *testing.T) {
	c := newCatalog(
		&Skill{Name: "repo", Description: "Repo.", Source: SourceWorkspace},
		&Skill{Name: "manual", Description: "M.", Source: SourceWorkspace, DisableModelInvocation: true},
		&Skill{Name: "web-access", Description: "Web.", Source: SourceBuiltin},
		&Skill{Name: "pinned", Description: "P."},
		&Skill{Name: "often", Description: "O."},
		&Skill{Name: "sometimes", Description: "S."},
		&Skill{Name: "off", Description: "Off."},
		&Skill{Name: "never", Description: "N."},
	)
	out := c.Summary(SummaryState{
		Disabled:   map[string]bool{"off": true},
		Trusted:    func(*Skill) bool { return false },
		Indexed:    map[string]bool{"web-access": true, "pinned": true},
		IndexBytes: 300,
		Uses:       map[string]int64{"repo": 50, "web-access": 40, "often": 9, "sometimes": 1, "off": 30, "pinned": 2},
		Pinned:     []string{"pinned"},
	})
	line := func(name string) string {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[1] == name {
				return l
			}
		}
		t.Fatalf("no line for %s:\n%s", name, out)
		return ""
	}
	if l := line("repo"); !strings.HasSuffix(l, "enabled, find_skills only (untrusted), 50 loads") {
		t.Errorf("untrusted workspace skill: %q", l)
	}
	if l := line("manual"); !strings.HasSuffix(l, "enabled, untrusted, manual only") {
		t.Errorf("untrusted manual skill: %q", l)
	}
	if l := line("sometimes"); !strings.HasSuffix(l, "enabled, find_skills only, 1 load") {
		t.Errorf("loaded once: %q", l)
	}
	if l := line("never"); !strings.HasSuffix(l, "enabled, find_skills only") {
		t.Errorf("never loaded: %q", l)
	}
	if !strings.Contains(out, "The index lists 2 skill(s)") {
		t.Errorf("the index's size counts other than the prompt's:\n%s", out)
	}
	want := "Loaded often but left out of the index: often (9 loads), sometimes (1 load). To list them, pin them: skills.index: [pinned, often, sometimes]\n"
	if !strings.HasSuffix(out, want) {
		t.Errorf("pin advice: want %q in\n%s", want, out)
	}
	if quiet := c.Summary(SummaryState{Indexed: map[string]bool{}}); strings.Contains(quiet, "pin them") {
		t.Errorf("pin advice without load counts:\n%s", quiet)
	}
}

// Which skills make the 20-entry index is a rule, not the alphabet:
// builtin, then workspace, then skills.index, then by name; the index says
// how many it left out and that find_skills reaches them.
func TestIndexRule(t *testing.T) {
	var all []*Skill
	for i := range 25 {
		all = append(all, &Skill{Name: fmt.Sprintf("a%02d", i), Description: "Library skill."})
	}
	all = append(all,
		&Skill{Name: "web-access", Description: "Builtin.", Source: SourceBuiltin},
		&Skill{Name: "skill-authoring", Description: "Builtin.", Source: SourceBuiltin},
		&Skill{Name: "zz-repo", Description: "Workspace.", Source: SourceWorkspace},
	)
	order := IndexOrder{Pinned: []string{"a23", "missing", "a21", "a23"}}
	c := newCatalog(all...).WithOrder(order)
	text, _ := c.Index(nil)
	listed, leftOut := c.IndexListing(nil)
	want := []string{"skill-authoring", "web-access", "zz-repo", "a23", "a21"}
	for i := range 15 {
		want = append(want, fmt.Sprintf("a%02d", i))
	}
	if !reflect.DeepEqual(listed, want) {
		t.Errorf("listed %v\nwant   %v", listed, want)
	}
	if wantOut := []string{"a15", "a16", "a17", "a18", "a19", "a20", "a22", "a24"}; !reflect.DeepEqual(leftOut, wantOut) {
		t.Errorf("left out %v, want %v", leftOut, wantOut)
	}
	if !strings.HasSuffix(text, "\n8 more skills are not listed here; find_skills(query) searches every skill.\n") {
		t.Errorf("index does not say what it left out:\n%s", text[max(0, len(text)-200):])
	}
	if len(text) > IndexMaxBytes {
		t.Errorf("index %d bytes", len(text))
	}
	// Byte-identical for the same skills and order (prompt caches).
	if again, _ := newCatalog(all...).WithOrder(order).Index(nil); again != text {
		t.Error("the index changed with nothing changed")
	}
	// Nothing left out, no footer line.
	if small, _ := newCatalog(all[:3]...).Index(nil); strings.Contains(small, "more skill") {
		t.Errorf("footer without anything left out:\n%s", small)
	}
}

// The index is a function of the skills and the configuration: the same
// skills, found in any order, with the same pins give byte-identical
// indexes, through a registry and its reloads too; only the pins move it.
// A builtin replaced by a user skill keeps the builtin's place.
func TestIndexOrderDependsOnlyOnSkillsAndConfig(t *testing.T) {
	var all []*Skill
	for i := range 25 {
		all = append(all, &Skill{Name: fmt.Sprintf("a%02d", i), Description: "Library skill."})
	}
	pins := IndexOrder{Pinned: []string{"a24"}}
	want, _ := newCatalog(all...).WithOrder(pins).Index(nil)
	reversed := slices.Clone(all)
	slices.Reverse(reversed)
	if got, _ := newCatalog(reversed...).WithOrder(pins).Index(nil); got != want {
		t.Errorf("the same skills in another order give another index:\n%s\nwant\n%s", got, want)
	}
	if other, _ := newCatalog(all...).WithOrder(IndexOrder{}).Index(nil); other == want {
		t.Error("the pins do not move the index")
	}

	home := t.TempDir()
	files := map[string]string{}
	for i := range 22 {
		n := fmt.Sprintf("a%02d", i)
		files[n+"/SKILL.md"] = skillMD(n, "Library skill.", "")
	}
	files["web-access/SKILL.md"] = skillMD("web-access", "The user's own web access.", "")
	writeTree(t, UserSkillsDir(home), files)
	open := func() *Registry {
		reg, err := NewRegistry(Layers{Builtin: builtinFS("1", ""), Home: home})
		if err != nil {
			t.Fatal(err)
		}
		reg.SetIndexOrder(IndexOrder{Pinned: []string{"a21"}})
		return reg
	}
	first, second := open(), open()
	listed, _ := first.Catalog().IndexListing(nil)
	if listed[0] != "web-access" || listed[1] != "a21" {
		t.Fatalf("listed %v: want the replaced builtin first, then the pin", listed)
	}
	text, _ := first.Catalog().Index(nil)
	if _, err := second.Reload(); err != nil {
		t.Fatal(err)
	}
	if again, _ := second.Catalog().Index(nil); again != text {
		t.Errorf("two registries of the same skills and pins, one reloaded, differ:\n%s\nwant\n%s", again, text)
	}
}

// BenchmarkIndex is the index of the builtin skills, as every turn builds
// it for the system prompt.
func BenchmarkIndex(b *testing.B) {
	c, err := Load(Layers{Builtin: builtin.FS, Home: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if text, _ := c.Index(nil); text == "" {
			b.Fatal("empty index")
		}
	}
}
