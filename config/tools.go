package config

import (
	"fmt"
	"reflect"
	"slices"
)

// ToolsKey is the top-level key under which the tool sections sit.
const ToolsKey = "tools"

// ToolSection is one key under tools: of the file, defined by the package
// that implements those tools, which registers it in an init function the
// way a chat platform registers its section:
//
//	func init() {
//		config.RegisterToolSection(config.ToolSection{Name: "mcp", NewConfig: func() config.SectionConfig { return &Config{} }})
//	}
//
// The types stay with the code that interprets them (the MCP client, the
// SSRF guard's allow list), and so does their validation, while config,
// which every package imports, imports none of them. The binary links
// them in by importing the tool packages.
type ToolSection struct {
	// Name is the section's key under tools:, e.g. "web_fetch".
	Name string
	// NewConfig returns a new section with its defaults, as a pointer to a
	// struct the file and the environment are decoded into.
	NewConfig func() SectionConfig
	// Inline puts the section's keys directly under tools: rather than
	// under tools.NAME: the scalar settings of the tool list as a whole
	// (tools.schema_budget, tools.pinned), owned by the package that
	// offers the tools. Name then only identifies the part (Tool's name).
	Inline bool
}

// Key is where s's keys sit in the file: "tools.NAME", or "tools" for an
// inline part.
func (s ToolSection) Key() string {
	if s.Inline {
		return ToolsKey
	}
	return ToolsKey + "." + s.Name
}

// toolSections holds the registered tool sections.
var toolSections = &registry[ToolSection]{kind: "tool section"}

// RegisterToolSection adds s to the sections under tools: every
// configuration knows. It panics on an empty, malformed or duplicate name
// and on a section that is not a pointer to a struct.
func RegisterToolSection(s ToolSection) {
	if s.NewConfig == nil {
		panic(fmt.Sprintf("config: tool section %q has no NewConfig", s.Name))
	}
	checkSection("tool section", s.Name, s.NewConfig)
	checkToolKeys(s)
	toolSections.add(s.Name, s)
}

// ToolSections returns every registered tool section, sorted by name.
func ToolSections() []ToolSection { return toolSections.all() }

// Tool returns c's section tools.NAME as T, the type its NewConfig
// returns; ok is false when c has no such section (a Config built by
// hand, or a section that is not registered).
func Tool[T SectionConfig](c Config, name string) (T, bool) {
	s, ok := c.Tools[name].(T)
	return s, ok
}

// validateTools runs every tool section's Validate and returns its
// problems with their keys made absolute ("tools.web_fetch.max_bytes: …").
func (c Config) validateTools() []string {
	var problems []string
	for _, s := range ToolSections() {
		if sec, ok := c.Tools[s.Name]; ok && sec != nil {
			problems = append(problems, keyed(s.Key(), sec.Validate())...)
		}
	}
	return problems
}

// toolsDocument is the tools: key as yaml sees it: one field per
// registered section that c has, the inline parts first (inlined, so
// their keys print at the top of tools:), or an invalid Value when there
// is none.
func (c *Config) toolsDocument() reflect.Value {
	var fields []reflect.StructField
	var names []string
	parts := ToolSections()
	slices.SortStableFunc(parts, func(a, b ToolSection) int { return cmpBool(b.Inline, a.Inline) })
	for _, s := range parts {
		if sec, ok := c.Tools[s.Name]; ok && sec != nil {
			tag := fmt.Sprintf(`yaml:%q`, s.Name)
			if s.Inline {
				tag = `yaml:",inline"`
			}
			fields = append(fields, reflect.StructField{
				Name: fmt.Sprintf("Tool%d", len(fields)),
				Type: reflect.TypeOf(sec),
				Tag:  reflect.StructTag(tag),
			})
			names = append(names, s.Name)
		}
	}
	if len(fields) == 0 {
		return reflect.Value{}
	}
	doc := reflect.New(reflect.StructOf(fields))
	for i, name := range names {
		doc.Elem().Field(i).Set(reflect.ValueOf(c.Tools[name]))
	}
	return doc
}

// toolsDocumentNames names the fields of toolsDocument, in order.
func (c *Config) toolsDocumentNames() []string {
	parts := ToolSections()
	slices.SortStableFunc(parts, func(a, b ToolSection) int { return cmpBool(b.Inline, a.Inline) })
	var names []string
	for _, s := range parts {
		if sec, ok := c.Tools[s.Name]; ok && sec != nil {
			names = append(names, s.Name)
		}
	}
	return names
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// checkToolKeys panics when s's keys would collide under tools: with
// another part's: an inline part's key that is a section's name, or the
// other way round.
func checkToolKeys(s ToolSection) {
	keys := func(p ToolSection) []string {
		if !p.Inline {
			return []string{p.Name}
		}
		var out []string
		t := reflect.TypeOf(p.NewConfig()).Elem()
		for i := range t.NumField() {
			if name, _, ok := YAMLField(t.Field(i)); ok {
				out = append(out, name)
			}
		}
		return out
	}
	mine := keys(s)
	for _, other := range ToolSections() {
		for _, k := range keys(other) {
			if slices.Contains(mine, k) {
				panic(fmt.Sprintf("config: tool section %q: key tools.%s is %q's already", s.Name, k, other.Name))
			}
		}
	}
}

// fromToolsDocument copies a decoded tools: key back into c. A section
// written as null, or a null tools: key, keeps its defaults.
func (c *Config) fromToolsDocument(doc reflect.Value) {
	if !doc.IsValid() || doc.IsNil() {
		return
	}
	doc = doc.Elem()
	names := c.toolsDocumentNames()
	for i := range doc.NumField() {
		name := names[i]
		if sec, ok := doc.Field(i).Interface().(SectionConfig); ok && !reflect.ValueOf(sec).IsNil() {
			c.Tools[name] = sec
		}
	}
}
