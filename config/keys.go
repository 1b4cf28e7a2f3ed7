package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// EnvBinding is one environment variable Parley reads for its
// configuration and the key of the file it overrides.
type EnvBinding struct {
	Name string // e.g. PARLEY_LISTEN
	// Key is the key the variable overrides, e.g. "listen"; empty for a
	// variable that stands for no key (PARLEY_CONFIG names the file).
	Key string
}

// EnvBindings lists every environment variable of the configuration, the
// registered platforms' and tool sections' included, with the key each
// overrides, sorted by name.
func EnvBindings() []EnvBinding {
	c := Default()
	return c.envBindings()
}

func (c *Config) envBindings() []EnvBinding {
	paths := c.fieldPaths()
	out := []EnvBinding{{Name: "PARLEY_CONFIG"}}
	for _, v := range c.envVars() {
		b := EnvBinding{Name: v.Name}
		if v.field != nil {
			b.Key = paths[idOf(v.field)]
		}
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b EnvBinding) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// fieldID identifies one field of a Config in memory: its address and
// type (a struct and its first field share an address).
type fieldID struct {
	addr uintptr
	typ  reflect.Type
}

func idOf(ptr any) fieldID {
	v := reflect.ValueOf(ptr)
	return fieldID{v.Pointer(), v.Type().Elem()}
}

// fieldPaths maps every field of c, the sections' included, to its key in
// the file ("tools.web_search.api_key", "wecom_app.apps[0].secret"), so
// that an environment binding, which holds a pointer to its field, can be
// named by its key.
func (c *Config) fieldPaths() map[fieldID]string {
	out := map[fieldID]string{}
	walkFields(reflect.ValueOf(c).Elem(), "", out)
	for name, sec := range c.Sections {
		if sec != nil {
			walkFields(reflect.ValueOf(sec), name, out)
		}
	}
	for _, s := range ToolSections() {
		if sec := c.Tools[s.Name]; sec != nil {
			walkFields(reflect.ValueOf(sec), s.Key(), out)
		}
	}
	for name, sec := range c.Platforms {
		if sec != nil {
			walkFields(reflect.ValueOf(sec), name, out)
		}
	}
	return out
}

func walkFields(v reflect.Value, path string, out map[fieldID]string) {
	if v.CanAddr() && path != "" {
		out[fieldID{v.Addr().Pointer(), v.Type()}] = path
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			walkFields(v.Elem(), path, out)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			name, inline, ok := YAMLField(v.Type().Field(i))
			switch {
			case !ok:
			case inline:
				walkFields(v.Field(i), path, out)
			default:
				walkFields(v.Field(i), JoinKey(path, name), out)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			walkFields(v.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

// YAMLField returns the key of a struct field in the file: its yaml tag's
// name, or the lower-cased field name as yaml.v3 does; inline reports an
// inlined field; ok is false for a field the file does not hold
// (unexported, or tagged "-").
func YAMLField(f reflect.StructField) (name string, inline, ok bool) {
	if !f.IsExported() {
		return "", false, false
	}
	name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return "", false, false
	}
	if slices.Contains(strings.Split(opts, ","), "inline") {
		return "", true, true
	}
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name, false, true
}

// JoinKey joins a key to the path of the mapping it sits in.
func JoinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
