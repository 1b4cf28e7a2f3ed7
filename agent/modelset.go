package agent

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/policy"
)

// ModelSet is the models of one configuration, model: and models:
// together: what a fallback, a policy level or a turn may name.
type ModelSet struct {
	Default *ModelSection
	Named   map[string]*NamedModel
}

// ModelsFrom returns the models of c.
func ModelsFrom(c config.Config) ModelSet {
	return ModelSet{Default: ModelSectionFrom(c), Named: ModelsSectionFrom(c).Models}
}

// Endpoint is one model with every inherited value resolved: what the
// agent needs to send it requests.
type Endpoint struct {
	// Key is the model's name in the configuration: config.DefaultModelKey
	// for model:, else its key under models:.
	Key        string
	Name       string
	BaseURL    string
	APIKey     config.Secret
	Vision     bool
	Timeout    time.Duration
	MaxRetries int
	// Fallbacks is the whole chain tried after this model, in order:
	// each fallback followed by its own, depth first, without repeats.
	Fallbacks []string
}

// sortedKeys lists the keys of models:, sorted.
func sortedKeys(m map[string]*NamedModel) []string { return slices.Sorted(maps.Keys(m)) }

// Keys lists config.DefaultModelKey, then the keys of models:, sorted.
func (s ModelSet) Keys() []string {
	return append([]string{config.DefaultModelKey}, sortedKeys(s.Named)...)
}

// Has reports whether key names a model: config.DefaultModelKey or a key
// of models:.
func (s ModelSet) Has(key string) bool {
	if key == config.DefaultModelKey {
		return true
	}
	m, ok := s.Named[key]
	return ok && m != nil
}

// fallbacksOf is the fallbacks list of the model key.
func (s ModelSet) fallbacksOf(key string) []string {
	if key == config.DefaultModelKey {
		return s.Default.Fallbacks
	}
	if m := s.Named[key]; m != nil {
		return m.Fallbacks
	}
	return nil
}

// Endpoint resolves the model key (config.DefaultModelKey or a key of
// models:).
func (s ModelSet) Endpoint(key string) (Endpoint, bool) {
	if !s.Has(key) {
		return Endpoint{}, false
	}
	d := s.Default
	e := Endpoint{Key: key, Name: d.Name, BaseURL: d.BaseURL, APIKey: d.APIKey, Vision: d.Vision, Timeout: d.Timeout, MaxRetries: d.MaxRetries}
	if m := s.Named[key]; key != config.DefaultModelKey && m != nil {
		e.Name, e.Vision = m.Name, m.Vision
		if m.BaseURL != "" && strings.TrimRight(m.BaseURL, "/") != strings.TrimRight(d.BaseURL, "/") {
			e.BaseURL, e.APIKey = m.BaseURL, ""
		}
		if m.APIKey.IsSet() {
			e.APIKey = m.APIKey
		}
		if m.Timeout > 0 {
			e.Timeout = m.Timeout
		}
		if m.MaxRetries != nil {
			e.MaxRetries = *m.MaxRetries
		}
	}
	e.Fallbacks = s.fallbackChain(key)
	return e, true
}

// Endpoints resolves every model, config.DefaultModelKey first.
func (s ModelSet) Endpoints() []Endpoint {
	keys := s.Keys()
	out := make([]Endpoint, 0, len(keys))
	for _, k := range keys {
		if e, ok := s.Endpoint(k); ok {
			out = append(out, e)
		}
	}
	return out
}

// fallbackChain lists the models tried after key, depth first: each
// fallback, then its own fallbacks, each model once. Validation refuses
// cycles; the seen set keeps a cycle that slipped through finite.
func (s ModelSet) fallbackChain(key string) []string {
	var out []string
	seen := map[string]bool{key: true}
	var walk func(k string)
	walk = func(k string) {
		for _, f := range s.fallbacksOf(k) {
			if seen[f] || !s.Has(f) {
				continue
			}
			seen[f] = true
			out = append(out, f)
			walk(f)
		}
	}
	walk(key)
	return out
}

// Choices names the models a reference may name, for errors: "default
// (the model: section), or a model added under models:", or the keys.
func (s ModelSet) Choices() string {
	keys := s.Keys()
	if len(keys) == 1 {
		return config.DefaultModelKey + " (the model: section), or a model added under models:"
	}
	return strings.Join(keys, ", ")
}

// Describe is the endpoint in a few words for an operator, its URL's
// credentials masked: "qwen2.5-vl at http://vllm:8000/v1, vision, then
// backup".
func (e Endpoint) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s at %s", e.Name, config.MaskURL(e.BaseURL))
	if e.Vision {
		b.WriteString(", vision")
	}
	if len(e.Fallbacks) > 0 {
		b.WriteString(", then " + strings.Join(e.Fallbacks, ", "))
	}
	return b.String()
}

// Descriptions describes every model by key (see Endpoint.Describe).
func (s ModelSet) Descriptions() map[string]string {
	out := map[string]string{}
	for _, e := range s.Endpoints() {
		out[e.Key] = e.Describe()
	}
	return out
}

// RequireKey reports a one-line error naming OPENAI_API_KEY when the
// default model's endpoint is a hosted service, which always needs a key,
// or naming models.KEY.api_key for a model of models: that lacks one;
// local servers (Ollama, vLLM on loopback or a private network) usually
// do not.
func (s ModelSet) RequireKey() error {
	if s.Default.APIKey.IsSet() {
		return s.requireNamedKeys()
	}
	u, err := url.Parse(s.Default.BaseURL)
	if err != nil {
		return nil // Validate already names the bad URL
	}
	if isLocalHost(u.Hostname()) {
		return s.requireNamedKeys()
	}
	return fmt.Errorf("OPENAI_API_KEY is not set; %s needs an API key (set it, or point OPENAI_BASE_URL at a local server)", u.Host)
}

// requireNamedKeys is RequireKey for the models of models:.
func (s ModelSet) requireNamedKeys() error {
	for _, e := range s.Endpoints()[1:] {
		if e.APIKey.IsSet() {
			continue
		}
		u, err := url.Parse(e.BaseURL)
		if err != nil || isLocalHost(u.Hostname()) {
			continue
		}
		return fmt.Errorf("models.%s.api_key is not set; %s needs an API key (set it, e.g. to \"${VARIABLE}\")", e.Key, u.Host)
	}
	return nil
}

func isLocalHost(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".local") || strings.HasSuffix(host, ".localhost") || !strings.Contains(host, ".") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsPrivate())
}

// sectionKeyOf is the file key of the model key's section.
func sectionKeyOf(key string) string {
	if key == config.DefaultModelKey {
		return ModelSectionName
	}
	return ModelsSectionName + "." + key
}

// check lists the problems of what names a model: every model's
// fallbacks, and the model of every level of c's policy tree.
func (s ModelSet) check(c config.Config) []string {
	var errs []string
	bad := func(key, format string, args ...any) {
		errs = append(errs, key+": "+fmt.Sprintf(format, args...))
	}
	for _, k := range s.Keys() {
		key := sectionKeyOf(k) + ".fallbacks"
		seen := map[string]bool{}
		for _, f := range s.fallbacksOf(k) {
			switch {
			case f == k:
				bad(key, "%q is this model itself", f)
			case !s.Has(f):
				bad(key, "unknown model %q (want %s)", f, s.Choices())
			case seen[f]:
				bad(key, "%q is listed twice", f)
			}
			seen[f] = true
		}
	}
	if cycle := s.fallbackCycle(); cycle != nil {
		bad(sectionKeyOf(cycle[0])+".fallbacks", "fallbacks go round in a cycle: %s", strings.Join(cycle, " → "))
	}
	var levels []string
	for _, l := range policy.FromConfig(c).Levels() {
		if _, known := config.LookupPlatform(l.Platform); l.Platform != "" && !known {
			continue // the policy names the unknown platform
		}
		if l.Level.Model != "" && !s.Has(l.Level.Model) {
			levels = append(levels, fmt.Sprintf("%s.model: unknown model %q (want %s)", l.Key, l.Level.Model, s.Choices()))
		}
	}
	for _, l := range policy.ProfilesFromConfig(c).Levels() {
		if l.Level.Model != "" && !s.Has(l.Level.Model) {
			levels = append(levels, fmt.Sprintf("%s.model: unknown model %q (want %s)", l.Key, l.Level.Model, s.Choices()))
		}
	}
	slices.Sort(levels) // in the order the policy's own problems are
	return append(errs, levels...)
}

// fallbackCycle returns the first cycle of the fallback graph, as the
// models on it ending where it started, or nil. A model naming itself
// is reported by check already and is not a cycle here.
func (s ModelSet) fallbackCycle() []string {
	const (
		unvisited = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(k string) []string
	visit = func(k string) []string {
		state[k] = onPath
		path = append(path, k)
		for _, f := range s.fallbacksOf(k) {
			if f == k || !s.Has(f) {
				continue
			}
			switch state[f] {
			case onPath:
				i := slices.Index(path, f)
				return append(slices.Clone(path[i:]), f)
			case unvisited:
				if cyc := visit(f); cyc != nil {
					return cyc
				}
			}
		}
		path = path[:len(path)-1]
		state[k] = done
		return nil
	}
	for _, k := range s.Keys() {
		if state[k] == unvisited {
			if cyc := visit(k); cyc != nil {
				return cyc
			}
		}
	}
	return nil
}
