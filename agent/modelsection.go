package agent

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/internal/ident"
)

// The keys of the file this package defines.
const (
	ModelSectionName  = "model"
	ModelsSectionName = "models"
)

// ModelSection is the model: section: the OpenAI-compatible endpoint of
// the default model (config.DefaultModelKey) and the agent loop's limits.
type ModelSection struct {
	BaseURL string        `yaml:"base_url"`
	APIKey  config.Secret `yaml:"api_key"`
	Name    string        `yaml:"name"`
	Timeout time.Duration `yaml:"timeout"`
	// TurnTimeout bounds a whole turn: every request with its retries and
	// backoffs, and the tool calls between them.
	TurnTimeout time.Duration `yaml:"turn_timeout"`
	// MaxRetries is how often a failed request is sent again after the
	// first attempt; 0 never retries.
	MaxRetries        int    `yaml:"max_retries"`
	MaxToolIterations int    `yaml:"max_tool_iterations"`
	MaxTokens         int    `yaml:"max_tokens"`
	SystemPrompt      string `yaml:"system_prompt"`

	// MaxToolCallsPerAnswer and MaxToolCallsPerTurn cap the tool calls
	// run for one model answer and for a whole turn; calls past a cap
	// are answered with an error result instead of running.
	MaxToolCallsPerAnswer int `yaml:"max_tool_calls_per_answer"`
	MaxToolCallsPerTurn   int `yaml:"max_tool_calls_per_turn"`

	// Vision marks a model that accepts images.
	Vision bool `yaml:"vision"`
	// Fallbacks name models of models: (or config.DefaultModelKey, from
	// one of those) tried in order when this model fails.
	Fallbacks []string `yaml:"fallbacks"`
}

// DefaultModelSection is the model: section when the file says nothing.
// It is the one place these defaults are set: New falls back to it for a
// Config field left zero, so that a zero means the same in the file, in
// a Config built by hand and here.
func DefaultModelSection() *ModelSection {
	return &ModelSection{
		BaseURL:           "https://api.openai.com/v1",
		Name:              "gpt-4o-mini",
		Timeout:           60 * time.Second,
		TurnTimeout:       90 * time.Second,
		MaxRetries:        3,
		MaxToolIterations: 8,
		// A chat reply rarely needs a tenth of it; it bounds what one
		// model answer may cost.
		MaxTokens: 4096,
		// As many as the read-only calls the agent runs at once; a turn
		// is four such answers.
		MaxToolCallsPerAnswer: 16,
		MaxToolCallsPerTurn:   64,
	}
}

// ModelsSection is the models: section, further models by name for
// fallbacks and for policies that choose another model. In the file it is
// a mapping of names to models, so the section is that mapping, inline.
type ModelsSection struct {
	Models map[string]*NamedModel `yaml:",inline"`
}

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
	APIKey config.Secret `yaml:"api_key"`
	// Vision marks a model that accepts images.
	Vision bool `yaml:"vision"`
	// Fallbacks are tried in order when this model fails.
	Fallbacks []string `yaml:"fallbacks"`
	// Timeout bounds each request attempt; zero: model.timeout.
	Timeout time.Duration `yaml:"timeout"`
	// MaxRetries is this model's retry budget; unset: model.max_retries.
	MaxRetries *int `yaml:"max_retries"`
}

func init() {
	config.RegisterSection(config.SectionSpec{Name: ModelSectionName, NewConfig: func() config.SectionConfig { return DefaultModelSection() }})
	config.RegisterSection(config.SectionSpec{
		Name:      ModelsSectionName,
		NewConfig: func() config.SectionConfig { return &ModelsSection{} },
		// A fallback names a model of either section, and a policy level
		// names one too: those are checked with the whole configuration.
		Check: func(c config.Config) error { return config.Problems(ModelsFrom(c).check(c)) },
	})
}

// ModelSectionFrom returns c's model: section, or the defaults when c has
// none (a Config built by hand).
func ModelSectionFrom(c config.Config) *ModelSection {
	return config.SectionOr(c, ModelSectionName, DefaultModelSection)
}

// ModelsSectionFrom returns c's models: section, or an empty one when c
// has none.
func ModelsSectionFrom(c config.Config) *ModelsSection {
	if s, ok := config.SectionOf[*ModelsSection](c, ModelsSectionName); ok {
		return s
	}
	return &ModelsSection{}
}

// Env implements config.SectionConfig.
func (m *ModelSection) Env() []config.EnvVar {
	return []config.EnvVar{
		config.Env("OPENAI_API_KEY", &m.APIKey),
		config.Env("OPENAI_BASE_URL", &m.BaseURL),
		config.Env("PARLEY_MODEL", &m.Name),
	}
}

// Validate implements config.SectionConfig. The fallbacks, which may
// name models of models:, are checked by that section's Check.
func (m *ModelSection) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	if u, err := url.Parse(m.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("base_url", "%q is not an http(s) URL", m.BaseURL)
	}
	if m.Name == "" {
		bad("name", "must not be empty")
	}
	for _, p := range []struct {
		key string
		v   int
	}{{"max_tool_iterations", m.MaxToolIterations}, {"max_tool_calls_per_answer", m.MaxToolCallsPerAnswer},
		{"max_tool_calls_per_turn", m.MaxToolCallsPerTurn}, {"max_tokens", m.MaxTokens}} {
		if p.v <= 0 {
			bad(p.key, "must be greater than 0, got %d", p.v)
		}
	}
	if m.MaxRetries < 0 {
		bad("max_retries", "must not be negative")
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"timeout", m.Timeout}, {"turn_timeout", m.TurnTimeout}} {
		if d.v <= 0 {
			bad(d.key, "must be a positive duration such as 30s")
		}
	}
	return errors.Join(errs...)
}

// Env implements config.SectionConfig: every models.*.api_key written
// "${NAME}" is bound to NAME.
func (s *ModelsSection) Env() []config.EnvVar {
	var vars []config.EnvVar
	for _, k := range sortedKeys(s.Models) {
		if m := s.Models[k]; m != nil {
			vars = append(vars, config.EnvRefs(&m.APIKey)...)
		}
	}
	return vars
}

// Validate implements config.SectionConfig: each model on its own. The
// fallbacks are checked by the section's Check, with model:.
func (s *ModelsSection) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	for _, k := range sortedKeys(s.Models) {
		m := s.Models[k]
		switch {
		case k == config.DefaultModelKey:
			bad(k, "%q is the name of the model: section; pick another name", k)
			continue
		case !modelKey(k):
			bad(k, "a model's name must be letters, digits, '_', '-' or '.' (at most 63), starting with a letter or digit")
			continue
		case m == nil:
			bad(k, "must be a section with at least name:")
			continue
		}
		if m.Name == "" {
			bad(k+".name", "must not be empty")
		}
		if m.BaseURL != "" {
			if u, err := url.Parse(m.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(k+".base_url", "%q is not an http(s) URL", m.BaseURL)
			}
		}
		if err := config.UnresolvedEnvRef(m.APIKey); err != nil {
			bad(k+".api_key", "%v", err)
		}
		if m.Timeout < 0 {
			bad(k+".timeout", "must not be negative (0: model.timeout)")
		}
		if m.MaxRetries != nil && *m.MaxRetries < 0 {
			bad(k+".max_retries", "must not be negative")
		}
	}
	return errors.Join(errs...)
}

// modelKey is what a key of models: may be: it names the model in metrics
// and logs, so it is kept to a short plain word
// (^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$).
func modelKey(k string) bool { return ident.Led(k, modelKeyFirst, modelKeyRest, 0, 62) }

var modelKeyFirst, modelKeyRest = ident.Of("A-Za-z0-9"), ident.Of("A-Za-z0-9_.-")
