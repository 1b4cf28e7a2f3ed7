package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// registry holds what packages register from their init functions — the
// platforms, the tool sections — and is read-only afterwards. Like
// database/sql drivers, these are linked into the binary, not configured;
// the registries are the package's only globals.
type registry[T any] struct {
	kind string // "platform", "tool section": for the panics

	mu     sync.RWMutex
	byName map[string]T
}

// add registers v as name. It panics on a malformed or duplicate name,
// since either is a programming error.
func (r *registry[T]) add(name string, v T) {
	if name == "" || strings.ToLower(name) != name || strings.ContainsAny(name, ". :") {
		panic(fmt.Sprintf("config: %s name %q must be a non-empty lower-case word", r.kind, name))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.byName[name]; dup {
		panic(fmt.Sprintf("config: %s %q registered twice", r.kind, name))
	}
	if r.byName == nil {
		r.byName = map[string]T{}
	}
	r.byName[name] = v
}

// get returns what is registered as name.
func (r *registry[T]) get(name string) (T, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.byName[name]
	return v, ok
}

// all returns everything registered, sorted by name.
func (r *registry[T]) all() []T {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]T, 0, len(r.byName))
	for _, name := range slices.Sorted(maps.Keys(r.byName)) {
		out = append(out, r.byName[name])
	}
	return out
}

// checkSection panics unless newConfig returns a pointer to a struct, the
// only kind of section the file can be decoded into in place.
func checkSection[T any](kind, name string, newConfig func() T) {
	if t := reflect.TypeOf(newConfig()); t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("config: %s %q: NewConfig must return a pointer to a struct, got %v", kind, name, t))
	}
}
