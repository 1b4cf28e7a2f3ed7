package agent_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	_ "github.com/parleyhq/parley/channels/install" // the platforms a policy names
	"github.com/parleyhq/parley/config"
)

const modelsYAML = `
model:
  name: gpt-4.1
  api_key: sk-primary-777
  vision: true
  fallbacks: [backup]
models:
  backup: {name: qwen2.5-vl, base_url: http://vllm:8000/v1, api_key: "${QWEN_KEY}", vision: true, fallbacks: [cheap]}
  cheap: {name: gpt-4.1-mini, timeout: 5s, max_retries: 0}
policies:
  platforms:
    feishu: {model: backup}
`

func TestModelsLoadAndResolve(t *testing.T) {
	cfg, err := config.Load(writeFile(t, modelsYAML), env(map[string]string{"QWEN_KEY": "qwen-secret-999"}))
	if err != nil {
		t.Fatal(err)
	}
	models := agent.ModelsFrom(cfg)
	if got := models.Keys(); !slices.Equal(got, []string{"default", "backup", "cheap"}) {
		t.Errorf("ModelKeys = %v", got)
	}
	def, _ := models.Endpoint(config.DefaultModelKey)
	if def.Name != "gpt-4.1" || !def.Vision || !slices.Equal(def.Fallbacks, []string{"backup", "cheap"}) || def.MaxRetries != agent.DefaultModelSection().MaxRetries {
		t.Errorf("default = %+v (fallbacks follow the fallbacks' own, depth first)", def)
	}
	backup, ok := models.Endpoint("backup")
	if !ok || backup.APIKey.Reveal() != "qwen-secret-999" || backup.BaseURL != "http://vllm:8000/v1" || !backup.Vision ||
		backup.Timeout != agent.DefaultModelSection().Timeout || !slices.Equal(backup.Fallbacks, []string{"cheap"}) {
		t.Errorf("backup = %+v", backup)
	}
	// cheap shares model:'s endpoint, so it inherits model:'s key; its own
	// timeout and retry budget replace model:'s.
	cheap, _ := models.Endpoint("cheap")
	if cheap.APIKey.Reveal() != "sk-primary-777" || cheap.BaseURL != agent.DefaultModelSection().BaseURL || cheap.Timeout != 5*time.Second || cheap.MaxRetries != 0 {
		t.Errorf("cheap = %+v", cheap)
	}
	if _, ok := models.Endpoint("nope"); ok {
		t.Error("an unknown model resolved")
	}
	if d := models.Descriptions()["backup"]; d != "qwen2.5-vl at http://vllm:8000/v1, vision, then cheap" {
		t.Errorf("description = %q", d)
	}
	// config check masks every model's key.
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"qwen-secret-999", "sk-primary-777"} {
		if strings.Contains(string(out), s) {
			t.Errorf("config check shows %q:\n%s", s, out)
		}
	}
	if strings.Count(string(out), "api_key: <secret>") != 2 {
		t.Errorf("want model.api_key and models.backup.api_key masked:\n%s", out)
	}
}

// A key written for another host is never sent to it: a model on its own
// endpoint without a key of its own has none.
func TestModelKeyStaysWithItsHost(t *testing.T) {
	cfg, err := config.Load(writeFile(t, "model:\n  api_key: sk-openai\nmodels:\n  local: {name: llama, base_url: 'http://10.0.0.9:8000/v1'}\n  remote: {name: m, base_url: 'https://api.example.com/v1'}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"local", "remote"} {
		if e, _ := agent.ModelsFrom(cfg).Endpoint(k); e.APIKey.IsSet() {
			t.Errorf("%s got model:'s key", k)
		}
	}
	err = agent.ModelsFrom(cfg).RequireKey()
	if err == nil || !strings.Contains(err.Error(), "models.remote.api_key") || strings.Contains(err.Error(), "local") {
		t.Errorf("RequireModelKey = %v, want models.remote.api_key named (a private-network model needs none)", err)
	}
}

func TestModelsValidation(t *testing.T) {
	tests := []struct {
		name, yaml string
		env        map[string]string
		want       []string
	}{
		{"unknown fallback", "model:\n  fallbacks: [bakup]\n", nil, []string{"model.fallbacks", `unknown model "bakup"`}},
		{"unknown fallback of a named model", "models:\n  b: {name: x, fallbacks: [zz]}\n", nil, []string{"models.b.fallbacks", `"zz"`, "default, b"}},
		{"fallback to itself", "models:\n  b: {name: x, fallbacks: [b]}\n", nil, []string{"models.b.fallbacks", "itself"}},
		{"fallback twice", "model:\n  fallbacks: [b, b]\nmodels:\n  b: {name: x}\n", nil, []string{"model.fallbacks", "twice"}},
		{"cycle", "model:\n  fallbacks: [a]\nmodels:\n  a: {name: x, fallbacks: [b]}\n  b: {name: y, fallbacks: [default]}\n", nil,
			[]string{"cycle", "default → a → b → default"}},
		{"cycle among named", "models:\n  a: {name: x, fallbacks: [b]}\n  b: {name: y, fallbacks: [a]}\n", nil, []string{"models.a.fallbacks", "a → b → a"}},
		{"reserved name", "models:\n  default: {name: x}\n", nil, []string{"models.default", "model: section"}},
		{"bad name", "models:\n  'a b': {name: x}\n", nil, []string{"models.a b", "letters, digits"}},
		{"no name", "models:\n  b: {base_url: 'http://x:1/v1'}\n", nil, []string{"models.b.name", "must not be empty"}},
		{"empty entry", "models:\n  b:\n", nil, []string{"models.b", "at least name"}},
		{"bad url", "models:\n  b: {name: x, base_url: 'ftp://x'}\n", nil, []string{"models.b.base_url"}},
		{"unset key variable", "models:\n  b: {name: x, api_key: '${NOPE_KEY}'}\n", nil, []string{"models.b.api_key", "NOPE_KEY is not set"}},
		{"negative retries", "models:\n  b: {name: x, max_retries: -1}\n", nil, []string{"models.b.max_retries"}},
		{"negative timeout", "models:\n  b: {name: x, timeout: -1s}\n", nil, []string{"models.b.timeout"}},
		{"unknown key", "models:\n  b: {name: x, system_prompt: hi}\n", nil, []string{`unknown key "system_prompt"`}},
		{"unknown policy model", "policies:\n  platforms:\n    feishu: {model: backup}\n", nil,
			[]string{"policies.platforms.feishu.model", `unknown model "backup"`}},
		{"unknown chat model", "models:\n  b: {name: x}\npolicies:\n  platforms:\n    slack:\n      workspaces:\n        T1:\n          chats:\n            C1: {model: c}\n", nil,
			[]string{"policies.platforms.slack.workspaces.T1.chats.C1.model", `"c"`}},
		{"unknown profile model", "models:\n  b: {name: x}\nprofiles:\n  ops:\n    model: big\n", nil,
			[]string{`line 5: profiles.ops.model: unknown model "big" (want default, b)`}},
		{"unknown default-level model", "policies:\n  default: {model: x}\n", nil, []string{"policies.default.model"}},
		{"unknown model under an unknown platform", "policies:\n  platforms:\n    bogus: {model: x}\n", nil, []string{"policies.platforms.bogus: unknown platform"}},
		// models: is a mapping in the file, though its section is a struct.
		{"models a list", "models: [a]\n", nil, []string{"line 1: models: a list where a mapping (key: value) belongs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(writeFile(t, tt.yaml), env(tt.env))
			if err == nil {
				t.Fatal("Load succeeded; want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(tt.name, "unknown platform") && strings.Contains(err.Error(), "bogus.model") {
				t.Errorf("error %q checks the model of a platform the policy cannot know", err)
			}
		})
	}
}

// The one-model configuration works as before, and a policy may name the
// default model explicitly.
func TestOneModelStillWorks(t *testing.T) {
	cfg, err := config.Load(writeFile(t, "model:\n  name: m1\npolicies:\n  platforms:\n    slack: {model: default}\n"), env(map[string]string{"PARLEY_MODEL": "m2", "OPENAI_BASE_URL": "http://localhost:1/v1"}))
	if err != nil {
		t.Fatal(err)
	}
	eps := agent.ModelsFrom(cfg).Endpoints()
	if len(eps) != 1 || eps[0].Key != config.DefaultModelKey || eps[0].Name != "m2" || eps[0].BaseURL != "http://localhost:1/v1" || len(eps[0].Fallbacks) != 0 {
		t.Errorf("endpoints = %+v", eps)
	}
}

func TestRequireModelKey(t *testing.T) {
	tests := []struct {
		base, key string
		wantErr   bool
	}{
		{"https://api.openai.com/v1", "", true},
		{"https://api.deepseek.com/v1", "", true},
		{"https://api.openai.com/v1", "sk-1", false},
		{"http://localhost:11434/v1", "", false},
		{"http://127.0.0.1:8000/v1", "", false},
		{"http://ollama:11434/v1", "", false},
		{"http://10.0.0.5:8000/v1", "", false},
	}
	for _, tt := range tests {
		cfg := config.Default()
		model := agent.ModelSectionFrom(cfg)
		model.BaseURL, model.APIKey = tt.base, config.Secret(tt.key)
		err := agent.ModelsFrom(cfg).RequireKey()
		if (err != nil) != tt.wantErr {
			t.Errorf("%s key=%q: err = %v, want error %v", tt.base, tt.key, err, tt.wantErr)
		}
		if err != nil && (!strings.Contains(err.Error(), "OPENAI_API_KEY") || strings.Contains(err.Error(), "\n")) {
			t.Errorf("error %q must be one line naming OPENAI_API_KEY", err)
		}
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "parley.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}
