package config_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/config"
)

func TestLoadErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name, yaml string
		env        map[string]string
		want       []string // substrings of the error
	}{
		{"unknown top-level key", "listen: :9000\nmodle:\n  name: x\n", nil, []string{"line 2", `unknown key "modle"`}},
		{"unknown nested key", "model:\n  name: x\n  temprature: 0.2\n", nil, []string{"line 3", `unknown key "temprature"`}},
		{"bad duration", "model:\n  timeout: soon\n", nil, []string{"line 2", "soon"}},
		{"wrong type", "sessions:\n  max_messages: lots\n", nil, []string{"line 2", "lots"}},
		{"negative limit", "sessions:\n  max_messages: -1\n", nil, []string{"sessions.max_messages"}},
		{"bad log format", "log:\n  format: xml\n", nil, []string{"log.format", "xml"}},
		{"bad listen", "listen: nope\n", nil, []string{"listen"}},
		{"bad base url", "model:\n  base_url: ftp://x\n", nil, []string{"model.base_url"}},
		{"bad redis url", "", map[string]string{"REDIS_URL": "http://x"}, []string{"redis.url"}},
		{"bad env number", "", map[string]string{"PARLEY_SKILL_BODY_BUDGET": "big"}, []string{"PARLEY_SKILL_BODY_BUDGET"}},
		{"unknown platform", "policies:\n  platforms:\n    irc:\n      admins: [a]\n", nil, []string{"policies.platforms.irc", "unknown platform"}},
		{"bad glob", "policies:\n  default:\n    tools:\n      deny: ['[']\n", nil, []string{"policies.default.tools.deny"}},
		{"lock ttl too short", "sessions:\n  lock_ttl: 100ms\n", nil, []string{"sessions.lock_ttl"}},
		{"negative typing delay", "gateway:\n  typing_delay: -1s\n", nil, []string{"gateway.typing_delay"}},
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
		})
	}
}

func TestEnvironmentOverridesFile(t *testing.T) {
	p := writeFile(t, "listen: ':9000'\nmodel:\n  name: from-file\n  timeout: 5s\nredis:\n  prefix: 'x:'\n")
	cfg, err := config.Load(p, env(map[string]string{
		"PARLEY_MODEL": "from-env", "REDIS_URL": "redis://localhost:6380/1",
		"PARLEY_SKILL_BODY_BUDGET": "2048", "PARLEY_LOG_FORMAT": "json", "PARLEY_HOME": "/srv/parley",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if m := agent.ModelSectionFrom(cfg); m.Name != "from-env" || cfg.Listen != ":9000" || m.Timeout != 5*time.Second {
		t.Errorf("model/listen = %q %q %v", m.Name, cfg.Listen, m.Timeout)
	}
	if cfg.Redis.URL != "redis://localhost:6380/1" || cfg.Redis.Prefix != "x:" || cfg.Skills.BodyBudget != 2048 || cfg.Log.Format != "json" || cfg.Home != "/srv/parley" {
		t.Errorf("overrides not applied: %+v", cfg)
	}
}

func TestConfigFileFromEnvAndEmptyFile(t *testing.T) {
	p := writeFile(t, "")
	cfg, err := config.Load("", env(map[string]string{"PARLEY_CONFIG": p}))
	if err != nil {
		t.Fatalf("empty file: %v", err)
	}
	if agent.ModelSectionFrom(cfg).MaxToolIterations != 8 || cfg.Skills.BodyBudget != 16*1024 {
		t.Errorf("defaults lost: %+v", cfg)
	}
	if _, err := config.Load(filepath.Join(t.TempDir(), "missing.yaml"), env(nil)); err == nil {
		t.Error("a missing file is not an error")
	}
}

func TestYAMLMasksTheCoreSecrets(t *testing.T) {
	cfg := config.Default()
	model := agent.ModelSectionFrom(cfg)
	model.APIKey = "sk-live-123"
	cfg.Redis.URL = "redis://user:hunter2@redis:6379/0"
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"sk-live-123", "hunter2"} {
		if strings.Contains(string(out), s) {
			t.Errorf("config shows secret %q:\n%s", s, out)
		}
	}
	if !strings.Contains(string(out), "api_key: <secret>") || !strings.Contains(string(out), "redis://user:xxxxx@redis:6379/0") {
		t.Errorf("secrets not masked as expected:\n%s", out)
	}
	if model.APIKey.Reveal() != "sk-live-123" {
		t.Error("printing changed the value")
	}
}

// TestEnvBindingsNameTheirKeys: every variable of the core keys is named
// with the key it overrides, from the field it binds.
func TestEnvBindingsNameTheirKeys(t *testing.T) {
	got := map[string]string{}
	for _, b := range config.EnvBindings() {
		got[b.Name] = b.Key
	}
	want := map[string]string{
		"PARLEY_CONFIG": "", "PARLEY_LISTEN": "listen", "PARLEY_HOME": "home", "PARLEY_WORKSPACE": "workspace",
		"PARLEY_LOG_FORMAT": "log.format", "PARLEY_LOG_LEVEL": "log.level", "OPENAI_API_KEY": "model.api_key",
		"OPENAI_BASE_URL": "model.base_url", "PARLEY_MODEL": "model.name", "REDIS_URL": "redis.url",
		"PARLEY_SKILL_BODY_BUDGET": "skills.body_budget",
	}
	for name, key := range want {
		if k, ok := got[name]; !ok || k != key {
			t.Errorf("%s binds %q (present %v), want %q", name, k, ok, key)
		}
	}
}
