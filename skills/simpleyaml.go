package skills

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// simpleFrontmatter parses the frontmatter nearly every skill has — one
// "key: value" per line, each value a plain or simply quoted string or a
// flow list of such strings — into the node tree yaml.Unmarshal makes of
// it, at a fraction of the cost (the YAML parser was most of start-up for
// a large catalog). ok is false for anything it is not sure of: block
// scalars, indentation, nesting, escapes, comments after values, values
// YAML would type as other than a string. The YAML parser then decides,
// so the result never differs from it (TestSimpleFrontmatterAgreesWithYAML).
func simpleFrontmatter(text string) (*yaml.Node, bool) {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		n := i + 1
		colon := strings.IndexByte(line, ':')
		if colon <= 0 || !simpleKey(line[:colon]) || colon+1 >= len(line) || line[colon+1] != ' ' {
			return nil, false
		}
		raw := strings.Trim(line[colon+1:], " ")
		col := len(line) - len(strings.TrimLeft(line[colon+1:], " ")) + 1
		v, ok := simpleValue(raw, n, col)
		if !ok {
			return nil, false
		}
		if m.Line == 0 {
			m.Line, m.Column = n, 1
		}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: line[:colon], Line: n, Column: 1}, v)
	}
	if len(m.Content) == 0 {
		return nil, false
	}
	return m, true
}

// simpleKey accepts keys such as name, allowed-tools, disable_x.
func simpleKey(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case i > 0 && (c >= '0' && c <= '9' || c == '-'):
		default:
			return false
		}
	}
	return plainString(k, false)
}

// simpleValue is the node of a value: a string or a flow list of them.
func simpleValue(v string, line, col int) (*yaml.Node, bool) {
	if strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle, Line: line, Column: col}
		inner := strings.Trim(v[1:len(v)-1], " ")
		if inner == "" {
			return seq, true
		}
		for _, it := range strings.Split(inner, ",") {
			it = strings.Trim(it, " ")
			s, style, ok := simpleString(it, true)
			if !ok {
				return nil, false
			}
			seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: style, Value: s, Line: line, Column: col})
		}
		return seq, true
	}
	s, style, ok := simpleString(v, false)
	if !ok {
		return nil, false
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: style, Value: s, Line: line, Column: col}, true
}

// simpleString is the text of a plain, 'single' or "double" quoted string
// without escapes, or ok false.
func simpleString(v string, flow bool) (string, yaml.Style, bool) {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') {
		q := v[0]
		inner := v[1 : len(v)-1]
		if v[len(v)-1] != q || strings.IndexByte(inner, q) >= 0 || strings.IndexByte(inner, '\\') >= 0 || !printable(inner) {
			return "", 0, false
		}
		style := yaml.DoubleQuotedStyle
		if q == '\'' {
			style = yaml.SingleQuotedStyle
		}
		return inner, style, true
	}
	return v, 0, plainString(v, flow)
}

// plainString reports whether v, unquoted, is read by YAML as exactly the
// string v: it starts with a letter, holds no ": ", " #" or trailing ":",
// no control or line-breaking character, and is no word YAML types as a
// boolean or null. In a flow list it also holds no ':' or bracket.
func plainString(v string, flow bool) bool {
	if v == "" || !printable(v) {
		return false
	}
	c := v[0]
	if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80) {
		return false
	}
	if strings.Contains(v, ": ") || strings.Contains(v, " #") || strings.HasSuffix(v, ":") || strings.HasSuffix(v, " ") {
		return false
	}
	if flow && strings.ContainsAny(v, ":[]{},") {
		return false
	}
	switch strings.ToLower(v) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null":
		return false
	}
	return true
}

// printable rejects control characters and the ones YAML treats as line
// breaks or byte-order marks, which the fast path does not model.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return !strings.ContainsAny(s, "\u0085\u2028\u2029\ufeff")
}
