package skills

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Spec limits checked by Lint; the loader tolerates longer values.
const (
	maxSpecDescription   = 1024
	maxSpecCompatibility = 500
)

// knownKeys are the frontmatter keys Lint accepts: the Agent Skills spec's
// plus the ones Parley adds.
var knownKeys = map[string]bool{
	"name": true, "description": true, "license": true, "compatibility": true,
	"metadata": true, "allowed-tools": true,
	"version": true, "author": true, "tags": true, "disable-model-invocation": true,
}

// decoder turns the frontmatter mapping into Skill fields. Loader mode drops
// wrongly shaped fields with a warning; strict mode (Lint) additionally
// reports every departure from the spec.
type decoder struct {
	file    string
	lineOff int
	strict  bool
	warns   []Warning
}

func (d *decoder) warnf(n *yaml.Node, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line + d.lineOff
	}
	d.warns = append(d.warns, Warning{File: d.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// rawName carries the frontmatter name before identity rules apply.
type rawName struct {
	value string
	node  *yaml.Node
}

// decode fills s from the mapping and returns the raw name.
func (d *decoder) decode(m *yaml.Node, s *Skill) rawName {
	var name rawName
	if m == nil {
		return name
	}
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := resolve(m.Content[i]), resolve(m.Content[i+1])
		if k == nil || v == nil {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.warnf(k, "frontmatter key must be a string; entry ignored")
			continue
		}
		key := k.Value
		if prev, dup := seen[key]; dup {
			// Most YAML tools keep the last value; do the same, but say so.
			d.warnf(k, "duplicate key %q (first at line %d); the last value wins", key, prev.Line+d.lineOff)
		}
		seen[key] = k
		switch key {
		case "name":
			d.strictString(key, v)
			if t, ok := d.text(key, v); ok {
				name = rawName{value: t, node: v}
			}
		case "description":
			d.strictString(key, v)
			if t, ok := d.text(key, v); ok {
				s.Description = strings.TrimSpace(t)
				if d.strict && utf8.RuneCountInString(s.Description) > maxSpecDescription {
					d.warnf(v, "description: %d characters, over the spec limit of %d", utf8.RuneCountInString(s.Description), maxSpecDescription)
				}
			}
		case "version":
			s.Version, _ = d.text(key, v)
			d.strictString(key, v)
		case "author":
			s.Author, _ = d.text(key, v)
			d.strictString(key, v)
		case "license":
			s.License, _ = d.text(key, v)
			d.strictString(key, v)
		case "compatibility":
			d.strictString(key, v)
			if t, ok := d.text(key, v); ok {
				s.Compatibility = strings.TrimSpace(t)
				if d.strict && utf8.RuneCountInString(s.Compatibility) > maxSpecCompatibility {
					d.warnf(v, "compatibility: %d characters, over the spec limit of %d", utf8.RuneCountInString(s.Compatibility), maxSpecCompatibility)
				}
			}
		case "tags":
			s.Tags = d.list(key, v, splitTags)
		case "allowed-tools":
			s.AllowedTools = d.list(key, v, splitTools)
		case "metadata":
			s.Metadata = d.metadata(v)
		case "disable-model-invocation":
			s.DisableModelInvocation = d.boolean(key, v)
		default:
			if d.strict {
				d.warnf(k, "unknown frontmatter key %q (allowed: name, description, license, compatibility, metadata, allowed-tools, version, author, tags, disable-model-invocation)", key)
			}
		}
	}
	return name
}

// text returns a scalar's original text. Null counts as absent; any other
// shape is dropped with a warning.
func (d *decoder) text(key string, v *yaml.Node) (string, bool) {
	switch {
	case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
		return "", false
	case v.Kind == yaml.ScalarNode:
		return v.Value, true
	default:
		d.warnf(v, "%s: expected a string, got %s; field dropped", key, shape(v))
		return "", false
	}
}

// strictString flags scalars YAML types as non-strings (version: 1.0 is a
// float to most tools, which may print it as 1).
func (d *decoder) strictString(key string, v *yaml.Node) {
	if d.strict && v.Kind == yaml.ScalarNode && v.Tag != "!!str" && v.Tag != "!!null" {
		d.warnf(v, "%s: value %s is a YAML %s, not a string; quote it", key, v.Value, strings.TrimPrefix(v.Tag, "!!"))
	}
}

// list accepts a YAML sequence of scalars or a single string that split
// breaks into items. Non-scalar items are dropped with a warning.
func (d *decoder) list(key string, v *yaml.Node, split func(string) []string) []string {
	switch v.Kind {
	case yaml.SequenceNode:
		var out []string
		for _, it := range v.Content {
			it = resolve(it)
			if it == nil || it.Kind != yaml.ScalarNode || it.Tag == "!!null" {
				d.warnf(it, "%s: list item must be a string, got %s; item dropped", key, shape(it))
				continue
			}
			if t := strings.TrimSpace(it.Value); t != "" {
				out = append(out, t)
			}
		}
		return out
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return nil
		}
		if d.strict && key == "tags" {
			d.warnf(v, "tags: expected a list such as [a, b]")
		}
		return split(v.Value)
	default:
		d.warnf(v, "%s: expected a list or string, got %s; field dropped", key, shape(v))
		return nil
	}
}

// splitTags reads "a, b, c" (or "a b c") as a tag list.
func splitTags(s string) []string {
	if !strings.Contains(s, ",") {
		return strings.Fields(s)
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// splitTools reads the spec's space-separated allowed-tools string; stray
// commas ("Read, Write") are tolerated.
func splitTools(s string) []string {
	var out []string
	for _, f := range strings.Fields(s) {
		if f = strings.TrimSuffix(f, ","); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// metadata decodes a string-to-string mapping, keeping each scalar's text as
// written. Nested lists and maps are dropped with a warning.
func (d *decoder) metadata(v *yaml.Node) map[string]string {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		d.warnf(v, "metadata: expected a mapping, got %s; field dropped", shape(v))
		return nil
	}
	out := map[string]string{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := resolve(v.Content[i]), resolve(v.Content[i+1])
		if k == nil || val == nil {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.warnf(k, "metadata: key must be a string; entry dropped")
			continue
		}
		if val.Kind != yaml.ScalarNode {
			d.warnf(val, "metadata.%s: expected a string, got %s; entry dropped", k.Value, shape(val))
			continue
		}
		if d.strict && val.Tag != "!!str" {
			d.warnf(val, "metadata.%s: value %q is a YAML %s, not a string; quote it", k.Value, val.Value, strings.TrimPrefix(val.Tag, "!!"))
		}
		out[k.Value] = val.Value
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// boolean reads true/false; anything else is dropped (false) with a warning.
func (d *decoder) boolean(key string, v *yaml.Node) bool {
	if v.Kind == yaml.ScalarNode {
		if v.Tag == "!!null" {
			return false
		}
		if b, err := strconv.ParseBool(strings.ToLower(v.Value)); err == nil {
			if d.strict && v.Tag != "!!bool" {
				d.warnf(v, "%s: value %q is a string, not a boolean; write true or false unquoted", key, v.Value)
			}
			return b
		}
	}
	d.warnf(v, "%s: expected true or false, got %s; field dropped", key, shape(v))
	return false
}

// shape names a node's kind for warnings.
func shape(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	default:
		return "an unsupported node"
	}
}
