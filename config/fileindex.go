package config

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// fileIndex says where each key of the file is: the path of every key and
// list item ("model.timeout", "admin.trusted_proxies[0]") and its value's
// line, so that problems found after decoding name their line too.
type fileIndex struct {
	entries []fileEntry
	byPath  map[string]int // index into entries
}

type fileEntry struct {
	path    string
	key     string // the key as written; "" for a list item
	keyLine int
	line    int // the value's line
	kind    yaml.Kind
	value   string // a scalar's text
}

func (f *fileIndex) index(n *yaml.Node, path string) {
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			f.index(c, path)
		}
		return
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f.add(fileEntry{path: JoinKey(path, k.Value), key: k.Value, keyLine: k.Line, line: v.Line, kind: v.Kind, value: v.Value})
			f.index(v, JoinKey(path, k.Value))
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			f.add(fileEntry{path: p, keyLine: v.Line, line: v.Line, kind: v.Kind, value: v.Value})
			f.index(v, p)
		}
	}
}

func (f *fileIndex) add(e fileEntry) {
	if f.byPath == nil {
		f.byPath = map[string]int{}
	}
	f.byPath[e.path] = len(f.entries)
	f.entries = append(f.entries, e)
}

// entry returns the entry of exactly path.
func (f *fileIndex) entry(path string) (fileEntry, bool) {
	i, ok := f.byPath[path]
	if !ok {
		return fileEntry{}, false
	}
	return f.entries[i], true
}

// lookup returns the entry of path, or of the nearest key above it that
// the file sets ("tools.mcp.servers.gh" for a problem with a key the file
// leaves out of that server).
func (f *fileIndex) lookup(path string) (fileEntry, bool) {
	for path != "" {
		if e, ok := f.entry(path); ok {
			return e, true
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return fileEntry{}, false
}

// locate prefixes a validation problem ("key: what is wrong") with the
// line of its key in the file, unless the value came from a variable
// (fromEnv maps a key to the variable that set it), whose name the
// problem gives instead.
func (f *fileIndex) locate(problem string, fromEnv map[string]string) string {
	key, rest, ok := strings.Cut(problem, ": ")
	if !ok || strings.ContainsAny(key, " \"") {
		return problem
	}
	if name, set := fromEnv[key]; set {
		if !strings.Contains(rest, name) {
			return problem + " (from " + name + ")"
		}
		return problem
	}
	if e, ok := f.lookup(key); ok {
		return fmt.Sprintf("line %d: %s", e.line, problem)
	}
	return problem
}

// typeErrorRE and unknownKeyRE are yaml.v3's type errors, one per problem.
// Compiled on first use: only a file with errors needs them.
var (
	typeErrorRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile("^line (\\d+): cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
	})
	unknownKeyRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^line (\d+): field (.+) not found in type (.+)$`) })
)

// typeErrors rewrites yaml.v3's type errors into plain words naming the
// key and its line: `line 12: model.timeout: "10" is not a duration (like
// 30s or 2m)` rather than "cannot unmarshal !!int `10` into
// time.Duration", `line 3: unknown key "bot_tokn" in slack` rather than
// "field bot_tokn not found in type slack.Config".
func (f *fileIndex) typeErrors(te *yaml.TypeError) []string {
	msgs := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		e = strings.TrimPrefix(e, "yaml: ")
		if m := unknownKeyRE().FindStringSubmatch(e); m != nil {
			line, _ := strconv.Atoi(m[1])
			e = f.unknownKey(line, m[2])
		} else if m := typeErrorRE().FindStringSubmatch(e); m != nil {
			line, _ := strconv.Atoi(m[1])
			e = f.wrongType(line, m[2], m[3], m[4])
		}
		msgs = append(msgs, e)
	}
	return msgs
}

func (f *fileIndex) unknownKey(line int, key string) string {
	msg := fmt.Sprintf("line %d: unknown key %q", line, key)
	for _, e := range f.entries {
		if e.keyLine == line && e.key == key {
			if parent := strings.TrimSuffix(e.path, "."+key); parent != e.path {
				msg += " in " + parent
			}
			if near := nearestKey(key, knownKeys(strings.TrimSuffix(e.path, key))); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			break
		}
	}
	return msg
}

// wrongType words a value of the wrong type: tag is yaml's (int, str,
// map, seq …), value its text (shortened by yaml beyond 10 characters),
// into the Go type it was meant for.
func (f *fileIndex) wrongType(line int, tag, value, into string) string {
	want := typeWords(into)
	if isMappingSection(into) {
		want = typeWords("map[string]")
	}
	// The deepest entry on the line whose value fits: "log:\n  level: {x: 1}"
	// has log's mapping and level's on line 2, and level is meant.
	var found *fileEntry
	for i := range f.entries {
		e := &f.entries[i]
		if e.line != line {
			continue
		}
		switch {
		case tag == "map" && e.kind == yaml.MappingNode, tag == "seq" && e.kind == yaml.SequenceNode,
			e.kind == yaml.ScalarNode && (e.value == value || strings.HasSuffix(value, "...") && strings.HasPrefix(e.value, strings.TrimSuffix(value, "..."))):
			found = e
		}
	}
	key := ""
	if found != nil {
		key = found.path + ": "
	}
	secret := strings.Contains(into, "Secret")
	switch {
	case tag == "map":
		return fmt.Sprintf("line %d: %sa mapping (key: value) where %s belongs", line, key, want)
	case tag == "seq":
		return fmt.Sprintf("line %d: %sa list where %s belongs", line, key, want)
	case found != nil && !secret:
		return fmt.Sprintf("line %d: %s%q is not %s", line, key, found.value, want)
	default:
		return fmt.Sprintf("line %d: %sthe value is not %s", line, key, want)
	}
}

// isMappingSection reports whether goType is the type of a registered
// section that is one mapping in the file (models:, a struct holding only
// an inline map): to an operator it is a mapping, not a section of keys.
func isMappingSection(goType string) bool {
	for _, s := range Sections() {
		t := reflect.TypeOf(s.NewConfig()).Elem()
		if t.String() != strings.TrimLeft(goType, "*") || t.NumField() != 1 {
			continue
		}
		_, inline, ok := YAMLField(t.Field(0))
		return ok && inline && t.Field(0).Type.Kind() == reflect.Map
	}
	return false
}

// typeWords names a Go type as the reference does, with an example.
func typeWords(goType string) string {
	t := strings.TrimLeft(goType, "*")
	switch {
	case t == "time.Duration":
		return "a duration (like 30s or 2m)"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "a whole number"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "string" || strings.HasSuffix(t, ".Secret") || strings.HasSuffix(t, ".SecretURL") || strings.HasSuffix(t, ".SecretTemplate"):
		return "text"
	case strings.HasPrefix(t, "[]"):
		return "a list (like [a, b])"
	case strings.HasPrefix(t, "map["):
		return "a mapping (key: value)"
	}
	return "a section of keys"
}

// knownKeys lists the keys the default configuration has under prefix
// (ending in "." or empty for the top level), for suggestions.
func knownKeys(prefix string) []string {
	c := Default()
	seen := map[string]bool{}
	visitValues(c.document(), "", func(path string, _ reflect.Value) {
		if rest, ok := strings.CutPrefix(path, prefix); ok && rest != "" && !strings.ContainsAny(rest, ".[") {
			seen[rest] = true
		}
	})
	return slices.Sorted(maps.Keys(seen))
}

// nearestKey returns the one of keys within two edits of key, if any.
func nearestKey(key string, keys []string) string {
	best, bestD := "", 3
	for _, k := range keys {
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
