package skills

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxSkillFileBytes is the largest SKILL.md Parley reads. Real skills are a
// few KiB; anything this big is a mistake or an attack on start-up time.
const MaxSkillFileBytes = 256 << 10

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// frontmatter is SKILL.md split into its parsed YAML mapping and its body.
type frontmatter struct {
	mapping  *yaml.Node // top-level mapping; nil when the block is empty
	lineOff  int        // add to a yaml.Node line to get the SKILL.md line
	body     string
	bodyOff  int // where body starts in the normalised text
	bodyLine int
	fixed    []int // SKILL.md lines rewritten by the lenient retry
	// leadingBlank counts blank lines before the opening "---".
	leadingBlank int
}

// normalise strips a UTF-8 BOM and turns CRLF into LF so that the rest of
// the package only deals with one line ending.
func normalise(data []byte) string {
	data = bytes.TrimPrefix(data, utf8BOM)
	return strings.ReplaceAll(string(data), "\r\n", "\n")
}

// isFence reports whether line is a "---" frontmatter delimiter; trailing
// blanks are tolerated because editors leave them.
func isFence(line string) bool {
	return strings.TrimRight(line, " \t") == "---"
}

// splitFrontmatter separates the YAML block (between "---" lines at the
// start) from the body. fmLine is the SKILL.md line of the first YAML line;
// lead counts blank lines before the opening "---", which are tolerated
// (and reported) because they are an easy slip that loses a whole skill.
func splitFrontmatter(text string) (yamlText string, fmLine int, body string, bodyLine int, lead int, err error) {
	first, rest, ok := strings.Cut(text, "\n")
	for ok && strings.TrimSpace(first) == "" {
		lead++
		first, rest, ok = strings.Cut(rest, "\n")
	}
	if !isFence(first) {
		return "", 0, "", 0, 0, fmt.Errorf("SKILL.md must start with a %q line: %w", "---", ErrNoFrontmatter)
	}
	if !ok {
		return "", 0, "", 0, 0, fmt.Errorf("frontmatter is not closed by a %q line: %w", "---", ErrNoFrontmatter)
	}
	line := 2 + lead
	var yamlLines []string
	for {
		cur, next, more := strings.Cut(rest, "\n")
		if isFence(cur) {
			if !more {
				next = ""
			}
			// Blank lines between the frontmatter and the text carry nothing;
			// dropping them keeps injections tidy and BodyLine exact.
			bodyLine = line + 1
			for {
				blank, after, found := strings.Cut(next, "\n")
				if !found || strings.TrimSpace(blank) != "" {
					break
				}
				next = after
				bodyLine++
			}
			return strings.Join(yamlLines, "\n"), 2 + lead, next, bodyLine, lead, nil
		}
		if !more {
			return "", 0, "", 0, 0, fmt.Errorf("frontmatter is not closed by a %q line: %w", "---", ErrNoFrontmatter)
		}
		yamlLines = append(yamlLines, cur)
		rest = next
		line++
	}
}

// parseFrontmatter splits text and parses the YAML block as a yaml.Node, so
// scalars keep their original text. When the YAML is invalid it retries once
// with lenientFix; only if that fails too is the file rejected.
func parseFrontmatter(text string) (*frontmatter, int, error) {
	yamlText, fmLine, body, bodyLine, lead, err := splitFrontmatter(text)
	if err != nil {
		return nil, 1, err
	}
	fm := &frontmatter{lineOff: fmLine - 1, body: body, bodyOff: len(text) - len(body), bodyLine: bodyLine, leadingBlank: lead}
	doc, simple := simpleFrontmatter(yamlText)
	if !simple {
		doc, err = decodeYAML(yamlText)
	}
	if err != nil {
		// One lenient retry; report the original error if it does not help,
		// since that is the one describing what the author wrote.
		fixedText, fixedLines := lenientFix(yamlText)
		var retryErr error = err
		if len(fixedLines) > 0 {
			doc, retryErr = decodeYAML(fixedText)
		}
		if retryErr != nil {
			line := fmLine
			if l := yamlErrLine(err); l > 0 {
				line = l + fm.lineOff
			}
			return nil, line, fmt.Errorf("%w: %s", ErrBadYAML, fileLines(err, fm.lineOff))
		}
		for _, l := range fixedLines {
			fm.fixed = append(fm.fixed, l+fm.lineOff)
		}
	}
	if doc != nil {
		if doc.Kind != yaml.MappingNode {
			return nil, doc.Line + fm.lineOff, fmt.Errorf("%w: frontmatter must be a mapping of keys to values", ErrBadYAML)
		}
		fm.mapping = doc
	}
	return fm, 0, nil
}

// decodeYAML returns the top-level node of a single YAML document, or nil for
// an empty document.
func decodeYAML(text string) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, err
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil
	}
	return resolve(doc.Content[0]), nil
}

var yamlLineRe = regexp.MustCompile(`line (\d+)`)

// fileLines renders a yaml error with its "line N" references shifted from
// the YAML block to SKILL.md, matching the warning's own line.
func fileLines(err error, off int) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	return yamlLineRe.ReplaceAllStringFunc(msg, func(m string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(m, "line "))
		return "line " + strconv.Itoa(n+off)
	})
}

// yamlErrLine extracts the 1-based line from a yaml error message, 0 if none.
func yamlErrLine(err error) int {
	m := yamlLineRe.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// keyLineRe matches "key: value" with a plain (unquoted, non-block) value.
var keyLineRe = regexp.MustCompile(`^( *)([A-Za-z0-9_][A-Za-z0-9_.-]*)[ \t]*:[ \t]+(.*)$`)

// lenientFix rewrites the two mistakes hand-written frontmatter makes most:
// plain values containing ": " (e.g. "description: Use when: x", which YAML
// reads as a nested mapping) and tab indentation. Plain values, including
// their continuation lines, become one double-quoted scalar; merged
// continuation lines are left blank so YAML line numbers stay true. It
// returns the 1-based lines it changed (none means nothing to retry).
func lenientFix(text string) (string, []int) {
	lines := strings.Split(text, "\n")
	var changed []int
	for i, l := range lines {
		if expanded := expandLeadingTabs(l); expanded != l {
			lines[i] = expanded
			changed = append(changed, i+1)
		}
	}
	for i := 0; i < len(lines); i++ {
		m := keyLineRe.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, key, value := m[1], m[2], strings.TrimSpace(m[3])
		if value == "" || strings.ContainsRune("\"'|>[{&*!#%@`", rune(value[0])) {
			continue
		}
		parts := []string{stripComment(value)}
		j := i + 1
		for ; j < len(lines); j++ {
			t := strings.TrimSpace(lines[j])
			if t == "" || leadingSpaces(lines[j]) <= len(indent) || strings.HasPrefix(t, "#") {
				break
			}
			parts = append(parts, stripComment(t))
		}
		full := strings.Join(parts, " ")
		if strings.Contains(full, ": ") || strings.HasSuffix(full, ":") {
			lines[i] = indent + key + ": " + strconv.Quote(full)
			for k := i + 1; k < j; k++ {
				lines[k] = ""
			}
			changed = append(changed, i+1)
		}
		// Continuation lines belong to this value either way; skipping them
		// also keeps the scan linear on hostile input.
		i = j - 1
	}
	return strings.Join(lines, "\n"), uniqueSorted(changed)
}

// stripComment drops a YAML comment (" #...") from a plain value, matching
// what a YAML parser would have done with it.
func stripComment(v string) string {
	for i := 1; i < len(v); i++ {
		if v[i] == '#' && (v[i-1] == ' ' || v[i-1] == '\t') {
			return strings.TrimSpace(v[:i])
		}
	}
	return v
}

func expandLeadingTabs(l string) string {
	i := 0
	for i < len(l) && (l[i] == ' ' || l[i] == '\t') {
		i++
	}
	if !strings.Contains(l[:i], "\t") {
		return l
	}
	return strings.ReplaceAll(l[:i], "\t", "  ") + l[i:]
}

func leadingSpaces(l string) int {
	return len(l) - len(strings.TrimLeft(l, " "))
}

func uniqueSorted(xs []int) []int {
	out := xs[:0]
	seen := map[int]bool{}
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	// Insertion sort: the slices are a handful of line numbers.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// resolve follows YAML aliases so that "*anchor" values decode like the
// value they point to.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 8; i++ {
		n = n.Alias
	}
	return n
}
