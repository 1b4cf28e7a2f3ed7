package skills

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// sameNode compares what the decoder reads of a node: kind, tag, text,
// line and children.
func sameNode(a, b *yaml.Node) error {
	if a == nil || b == nil {
		if a != b {
			return fmt.Errorf("one node is nil: %v %v", a, b)
		}
		return nil
	}
	if a.Kind != b.Kind || a.Tag != b.Tag || a.Value != b.Value || a.Line != b.Line || len(a.Content) != len(b.Content) {
		return fmt.Errorf("fast {kind %d tag %s value %q line %d, %d children} != yaml {kind %d tag %s value %q line %d, %d children}",
			a.Kind, a.Tag, a.Value, a.Line, len(a.Content), b.Kind, b.Tag, b.Value, b.Line, len(b.Content))
	}
	for i := range a.Content {
		if err := sameNode(a.Content[i], b.Content[i]); err != nil {
			return err
		}
	}
	return nil
}

// checkSimpleFrontmatter fails when the fast path accepts text and reads
// it differently from the YAML parser.
func checkSimpleFrontmatter(t *testing.T, text string) bool {
	t.Helper()
	fast, ok := simpleFrontmatter(text)
	if !ok {
		return false
	}
	slow, err := decodeYAML(text)
	if err != nil {
		t.Fatalf("fast path accepted what YAML refuses (%v):\n%s", err, text)
	}
	if err := sameNode(fast, slow); err != nil {
		t.Fatalf("%v for:\n%s", err, text)
	}
	return true
}

func TestSimpleFrontmatterAgreesWithYAML(t *testing.T) {
	for _, tc := range []struct {
		text string
		fast bool
	}{
		{"name: demo\ndescription: Use when deploying.", true},
		{"name: demo\ndescription: \"Use when: deploying\"\nversion: '1.0'\ntags: [ops, deploy, 'a b', \"c\"]\n\n# note\nallowed-tools: Read Write", true},
		{"name: demo\ndescription: 所有联网操作必须通过此技能处理，包括搜索和网页抓取\ntags: [联网]", true},
		{"name: demo\ndescription: C# and F#, (both) / more\ntags: []", true},
		{"name: demo\nname: again\ndescription: d", true},
		{"name: demo\ndescription: Use when: x", false},
		{"name: demo\ndescription: d # comment", false},
		{"name: demo\ndescription: |\n  block", false},
		{"name: demo\ndescription: >-\n  folded", false},
		{"name: demo\ndescription: d\n  continued", false},
		{"name: demo\nversion: 1.0\ndescription: d", false},
		{"name: demo\ndisable-model-invocation: true\ndescription: d", false},
		{"name: demo\ndescription: null", false},
		{"name: demo\ndescription: ~", false},
		{"name: demo\ndescription: \"with \\\"escape\\\"\"", false},
		{"name: demo\ndescription: 'it''s'", false},
		{"name: demo\ndescription: &a anchored", false},
		{"name: demo\ndescription: *a", false},
		{"name: demo\ndescription: - x", false},
		{"name: demo\ndescription:", false},
		{"name: demo\ndescription:\tx", false},
		{"name: demo\nmetadata:\n  k: v\ndescription: d", false},
		{"name: demo\ntags: [a: b]\ndescription: d", false},
		{"name: demo\ntags: [a, [b]]\ndescription: d", false},
		{"name: demo\ntags: [a,]\ndescription: d", false},
		{"name: demo\ndescription: ends with colon:", false},
		{"name: demo\ndescription: line\u2028break", false},
		{"\"name\": demo\ndescription: d", false},
		{"- list", false},
		{"", false},
	} {
		if got := checkSimpleFrontmatter(t, tc.text); got != tc.fast {
			t.Errorf("fast path taken=%v, want %v for:\n%s", got, tc.fast, tc.text)
		}
	}
}

func FuzzSimpleFrontmatter(f *testing.F) {
	for _, seed := range []string{
		"name: demo\ndescription: Use when deploying.",
		"name: demo\ndescription: \"quoted: yes\"\ntags: [a, 'b c']",
		"name: x\ndescription: a, b ,c [d] {e} !f &g *h |i >j %k @l `m",
		"description: yes\nname: No",
		"name: demo\ndescription: 1st\ntags: [1, 2.0]",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if strings.Contains(text, "\r") || !utf8.ValidString(text) {
			return // the loader refuses invalid UTF-8 and normalises CRLF first
		}
		checkSimpleFrontmatter(t, text)
	})
}
