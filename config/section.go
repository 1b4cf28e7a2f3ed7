package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
)

// SectionSpec is one top-level key of the file (sessions:, media:,
// gateway:) defined by the package that uses it, which registers it in an
// init function the way a platform registers its section:
//
//	func init() {
//		config.RegisterSection(config.SectionSpec{Name: "sessions", NewConfig: func() config.SectionConfig { return DefaultConfig() }})
//	}
//
// The type, its defaults and its validation then live beside the code that
// reads them, and config, which every package imports, imports none of
// them. The binary links the sections in by importing their packages.
type SectionSpec struct {
	// Name is the section's top-level key, e.g. "sessions".
	Name string
	// NewConfig returns a new section with its defaults, as a pointer to
	// a struct the file and the environment are decoded into.
	NewConfig func() SectionConfig
	// Check, when set, is run by Load after every section has validated
	// itself, with the whole configuration: the place for a rule that
	// reads other sections too (a policy naming a model or a platform).
	// Its problems name their keys in full ("policies.default.model: …"),
	// errors.Join'ed. c must not be changed.
	Check func(c Config) error
}

// sections holds the registered top-level sections.
var sections = &registry[SectionSpec]{kind: "section"}

// RegisterSection adds s to the top-level sections every configuration
// knows. It panics on an empty, malformed or duplicate name, a name that
// is a core key or a platform's, and a section that is not a pointer to a
// struct, since each is a programming error.
func RegisterSection(s SectionSpec) {
	if s.NewConfig == nil {
		panic(fmt.Sprintf("config: section %q has no NewConfig", s.Name))
	}
	if coreKeys()[s.Name] {
		panic(fmt.Sprintf("config: section name %q is a top-level key of the file already", s.Name))
	}
	if _, ok := platforms.get(s.Name); ok {
		panic(fmt.Sprintf("config: section name %q is a platform's", s.Name))
	}
	checkSection("section", s.Name, s.NewConfig)
	sections.add(s.Name, s)
}

// Sections returns every registered top-level section, sorted by name.
func Sections() []SectionSpec { return sections.all() }

// SectionOf returns c's top-level section name as T, the type its
// NewConfig returns; ok is false when c has no such section (a Config
// built by hand, or a section that is not registered).
func SectionOf[T SectionConfig](c Config, name string) (T, bool) {
	s, ok := c.Sections[name].(T)
	return s, ok
}

// SectionOr returns c's top-level section name as T, or what def returns
// when c has none (a Config built by hand): the FromConfig of each
// package that owns a section.
func SectionOr[T SectionConfig](c Config, name string, def func() T) T {
	if s, ok := SectionOf[T](c, name); ok {
		return s
	}
	return def()
}

// keyOrder is the order of the top-level keys in what `parley config
// check` prints, the core keys' and the registered sections' together, so
// that a section moving to the package that uses it does not reorder the
// printed file operators diff. A key not listed follows these, by name.
var keyOrder = []string{
	"listen", "home", "workspace", "log", "model", "models", "redis", "sessions",
	"gateway", "outbox", "server", "skills", "policies", "profiles", "admin", "audit", "media", "files",
}

// topLevel is one top-level key of the document: a core field of Config
// (core >= 0) or a registered section.
type topLevel struct {
	key  string
	core int // index of the field in core, or -1
}

// topLevels lists the keys of c's document in their printed order: the
// core keys and every section c has.
func (c *Config) topLevels() []topLevel {
	var out []topLevel
	byKey := map[string]topLevel{}
	t := reflect.TypeFor[core]()
	for i := range t.NumField() {
		if name, inline, ok := YAMLField(t.Field(i)); ok && !inline {
			byKey[name] = topLevel{key: name, core: i}
		}
	}
	for _, s := range Sections() {
		if sec, ok := c.Sections[s.Name]; ok && sec != nil {
			byKey[s.Name] = topLevel{key: s.Name, core: -1}
		}
	}
	for _, k := range keyOrder {
		if l, ok := byKey[k]; ok {
			out = append(out, l)
			delete(byKey, k)
		}
	}
	rest := make([]topLevel, 0, len(byKey))
	for _, l := range byKey {
		rest = append(rest, l)
	}
	slices.SortFunc(rest, func(a, b topLevel) int {
		if a.key < b.key {
			return -1
		}
		return 1
	})
	return append(out, rest...)
}

// validateSections runs every section's Validate, with its keys made
// absolute ("sessions.lock_ttl: …"), then every section's Check.
func (c Config) validateSections() []string {
	var problems []string
	for _, s := range Sections() {
		if sec, ok := c.Sections[s.Name]; ok && sec != nil {
			problems = append(problems, keyed(s.Name, sec.Validate())...)
		}
	}
	for _, s := range Sections() {
		if s.Check != nil {
			problems = append(problems, split(s.Check(c))...)
		}
	}
	return problems
}

// split lists the problems of err, errors.Join'ed or one.
func split(err error) []string {
	if err == nil {
		return nil
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// Problems joins problems, each "key: what is wrong", into the error a
// section's Validate or Check returns; nil when there are none.
func Problems(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = errors.New(p)
	}
	return errors.Join(errs...)
}
