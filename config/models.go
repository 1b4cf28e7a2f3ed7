package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley/internal/ident"
)

// DefaultModelKey is how fallbacks, policies and metrics name the model:
// section, the model every turn uses unless a policy names another.
const DefaultModelKey = "default"

// NamedModel is one entry of models:, a further model by name. Its keys
// are the endpoint keys of model:; the agent loop's limits (turn_timeout,
// max_tokens, max_tool_iterations, the system prompt, …) belong to the
// turn and are model:'s whichever model answers it.
type NamedModel struct {
	// Name is the model name sent to the endpoint. Required.
	Name string `yaml:"name"`
	// BaseURL is the OpenAI-compatible endpoint; empty: model.base_url.
	BaseURL string `yaml:"base_url"`
	// APIKey is the endpoint's key, often "${VARIABLE}". Empty: model.api_key,
	// but only when the endpoint is model:'s own, so that a key is never
	// sent to a host it was not written for.
	APIKey Secret `yaml:"api_key"`
	// Vision marks a model that accepts images.
	Vision bool `yaml:"vision"`
	// Fallbacks are tried in order when this model fails.
	Fallbacks []string `yaml:"fallbacks"`
	// Timeout bounds each request attempt; zero: model.timeout.
	Timeout time.Duration `yaml:"timeout"`
	// MaxRetries is this model's retry budget; unset: model.max_retries.
	MaxRetries *int `yaml:"max_retries"`
}

// Endpoint is one model with every inherited value resolved: what the
// agent needs to send it requests.
type Endpoint struct {
	// Key is the model's name in the configuration: DefaultModelKey for
	// model:, else its key under models:.
	Key        string
	Name       string
	BaseURL    string
	APIKey     Secret
	Vision     bool
	Timeout    time.Duration
	MaxRetries int
	// Fallbacks is the whole chain tried after this model, in order:
	// each fallback followed by its own, depth first, without repeats.
	Fallbacks []string
}

// modelKey is what a key of models: may be: it names the model in metrics
// and logs, so it is kept to a short plain word
// (^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$).
func modelKey(k string) bool { return ident.Led(k, modelKeyFirst, modelKeyRest, 0, 62) }

var modelKeyFirst, modelKeyRest = ident.Of("A-Za-z0-9"), ident.Of("A-Za-z0-9_.-")

// ModelKeys lists DefaultModelKey, then the keys of models:, sorted.
func (c Config) ModelKeys() []string {
	keys := make([]string, 0, 1+len(c.Models))
	for k := range c.Models {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return append([]string{DefaultModelKey}, keys...)
}

// HasModel reports whether key names a model: DefaultModelKey or a key
// of models:.
func (c Config) HasModel(key string) bool {
	if key == DefaultModelKey {
		return true
	}
	m, ok := c.Models[key]
	return ok && m != nil
}

// fallbacksOf is the fallbacks list of the model key.
func (c Config) fallbacksOf(key string) []string {
	if key == DefaultModelKey {
		return c.Model.Fallbacks
	}
	if m := c.Models[key]; m != nil {
		return m.Fallbacks
	}
	return nil
}

// Endpoint resolves the model key (DefaultModelKey or a key of models:).
func (c Config) Endpoint(key string) (Endpoint, bool) {
	if !c.HasModel(key) {
		return Endpoint{}, false
	}
	e := Endpoint{Key: key, Name: c.Model.Name, BaseURL: c.Model.BaseURL, APIKey: c.Model.APIKey, Vision: c.Model.Vision,
		Timeout: c.Model.Timeout, MaxRetries: c.Model.MaxRetries}
	if m := c.Models[key]; key != DefaultModelKey && m != nil {
		e.Name, e.Vision = m.Name, m.Vision
		if m.BaseURL != "" && strings.TrimRight(m.BaseURL, "/") != strings.TrimRight(c.Model.BaseURL, "/") {
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
	e.Fallbacks = c.fallbackChain(key)
	return e, true
}

// Endpoints resolves every model, DefaultModelKey first.
func (c Config) Endpoints() []Endpoint {
	out := make([]Endpoint, 0, 1+len(c.Models))
	for _, k := range c.ModelKeys() {
		if e, ok := c.Endpoint(k); ok {
			out = append(out, e)
		}
	}
	return out
}

// fallbackChain lists the models tried after key, depth first: each
// fallback, then its own fallbacks, each model once. Validation refuses
// cycles; the seen set keeps a cycle that slipped through finite.
func (c Config) fallbackChain(key string) []string {
	var out []string
	seen := map[string]bool{key: true}
	var walk func(k string)
	walk = func(k string) {
		for _, f := range c.fallbacksOf(k) {
			if seen[f] || !c.HasModel(f) {
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

// modelKeyOf is the file key of the model key's section.
func modelKeyOf(key string) string {
	if key == DefaultModelKey {
		return "model"
	}
	return "models." + key
}

// validateModels checks models: and the fallbacks of every model.
func (c Config) validateModels() []string {
	var errs []string
	bad := func(key, format string, args ...any) {
		errs = append(errs, key+": "+fmt.Sprintf(format, args...))
	}
	for _, k := range c.ModelKeys()[1:] {
		key := "models." + k
		m := c.Models[k]
		switch {
		case k == DefaultModelKey:
			bad(key, "%q is the name of the model: section; pick another name", k)
			continue
		case !modelKey(k):
			bad(key, "a model's name must be letters, digits, '_', '-' or '.' (at most 63), starting with a letter or digit")
			continue
		case m == nil:
			bad(key, "must be a section with at least name:")
			continue
		}
		if m.Name == "" {
			bad(key+".name", "must not be empty")
		}
		if m.BaseURL != "" {
			if u, err := url.Parse(m.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(key+".base_url", "%q is not an http(s) URL", m.BaseURL)
			}
		}
		if err := UnresolvedEnvRef(m.APIKey); err != nil {
			bad(key+".api_key", "%v", err)
		}
		if m.Timeout < 0 {
			bad(key+".timeout", "must not be negative (0: model.timeout)")
		}
		if m.MaxRetries != nil && *m.MaxRetries < 0 {
			bad(key+".max_retries", "must not be negative")
		}
	}
	for _, k := range c.ModelKeys() {
		key := modelKeyOf(k) + ".fallbacks"
		seen := map[string]bool{}
		for _, f := range c.fallbacksOf(k) {
			switch {
			case f == k:
				bad(key, "%q is this model itself", f)
			case !c.HasModel(f):
				bad(key, "unknown model %q (want %s)", f, c.ModelChoices())
			case seen[f]:
				bad(key, "%q is listed twice", f)
			}
			seen[f] = true
		}
	}
	if cycle := c.fallbackCycle(); cycle != nil {
		bad(modelKeyOf(cycle[0])+".fallbacks", "fallbacks go round in a cycle: %s", strings.Join(cycle, " → "))
	}
	return errs
}

// ModelChoices names the models a reference may name, for errors: "default
// (the model: section), or a model added under models:", or the keys.
func (c Config) ModelChoices() string {
	keys := c.ModelKeys()
	if len(keys) == 1 {
		return DefaultModelKey + " (the model: section), or a model added under models:"
	}
	return strings.Join(keys, ", ")
}

// fallbackCycle returns the first cycle of the fallback graph, as the
// models on it ending where it started, or nil. A model naming itself
// is reported by validateModels already and is not a cycle here.
func (c Config) fallbackCycle() []string {
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
		for _, f := range c.fallbacksOf(k) {
			if f == k || !c.HasModel(f) {
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
	for _, k := range c.ModelKeys() {
		if state[k] == unvisited {
			if cyc := visit(k); cyc != nil {
				return cyc
			}
		}
	}
	return nil
}

// modelEnv binds every models.*.api_key written "${NAME}" to NAME.
func (c *Config) modelEnv() []EnvVar {
	var vars []EnvVar
	for _, k := range c.ModelKeys()[1:] {
		if m := c.Models[k]; m != nil {
			vars = append(vars, EnvRefs(&m.APIKey)...)
		}
	}
	return vars
}

// requireModelKeys is RequireModelKey for the models of models:.
func (c Config) requireModelKeys() error {
	for _, e := range c.Endpoints()[1:] {
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

// Describe is the endpoint in a few words for an operator, its URL's
// credentials masked: "qwen2.5-vl at http://vllm:8000/v1, vision, then
// backup".
func (e Endpoint) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s at %s", e.Name, MaskURL(e.BaseURL))
	if e.Vision {
		b.WriteString(", vision")
	}
	if len(e.Fallbacks) > 0 {
		b.WriteString(", then " + strings.Join(e.Fallbacks, ", "))
	}
	return b.String()
}

// ModelDescriptions describes every model by key (see Endpoint.Describe).
func (c Config) ModelDescriptions() map[string]string {
	out := map[string]string{}
	for _, e := range c.Endpoints() {
		out[e.Key] = e.Describe()
	}
	return out
}
