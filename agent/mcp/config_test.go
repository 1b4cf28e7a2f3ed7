package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/config"
	"go.yaml.in/yaml/v3"
)

// The configuration as an operator writes it decodes into the exported
// types, strictly, with the keys the documentation names.
func TestConfigDecodesFromYAML(t *testing.T) {
	const file = `
servers:
  github:
    url: https://api.githubcopilot.com/mcp/
    headers:
      Authorization: Bearer ${GITHUB_TOKEN}
    timeout: 45s
    read: ["get_*", "list_*", "search_*"]
    tools:
      deny: ["delete_*"]
  files:
    command: npx
    args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]
    env:
      NODE_OPTIONS: --max-old-space-size=256
    cwd: /srv
    write: ["move_file"]
    tools:
      allow: ["read_*", "list_*", "move_file"]
`
	var cfg Config
	dec := yaml.NewDecoder(strings.NewReader(file))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	gh, files := cfg.Servers["github"], cfg.Servers["files"]
	if gh.Transport() != TransportHTTP || gh.Timeout != 45*time.Second || gh.Headers["Authorization"] != "Bearer ${GITHUB_TOKEN}" ||
		!slices.Equal(gh.Tools.Deny, []string{"delete_*"}) || gh.Tools.Allow != nil {
		t.Errorf("github = %+v", gh)
	}
	if files.Transport() != TransportStdio || files.Cwd != "/srv" || len(files.Args) != 3 || files.withDefaults().Timeout != DefaultTimeout {
		t.Errorf("files = %+v", files)
	}
	if got := cfg.EnvVars(); !slices.Equal(got, []string{"GITHUB_TOKEN"}) {
		t.Errorf("EnvVars = %v", got)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := ServerConfig{URL: "https://mcp.example.com/mcp"}
	tests := []struct {
		name   string
		server string
		cfg    ServerConfig
		want   string // "" for valid
	}{
		{"http", "gh", ok, ""},
		{"stdio", "files", ServerConfig{Command: "npx", Args: []string{"-y", "x"}, Env: map[string]config.SecretTemplate{"A": "${B}"}, Cwd: "/"}, ""},
		{"env reference in the url", "q", ServerConfig{URL: "https://x/mcp?key=${KEY}"}, ""},
		{"env reference in the host", "q", ServerConfig{URL: "https://${MCP_HOST}/mcp"}, ""},
		{"neither", "x", ServerConfig{}, "set command (a stdio server) or url"},
		{"both", "x", ServerConfig{Command: "a", URL: "https://x"}, "set command or url, not both"},
		{"relative url", "x", ServerConfig{URL: "/mcp"}, "url: must be an absolute http or https URL"},
		{"other scheme", "x", ServerConfig{URL: "ftp://x/mcp"}, "url: must be an absolute http or https URL"},
		{"headers on stdio", "x", ServerConfig{Command: "a", Headers: map[string]config.SecretTemplate{"A": "b"}}, "headers: only for a url server"},
		{"env on http", "x", ServerConfig{URL: "https://x", Env: map[string]config.SecretTemplate{"A": "b"}}, "env: only for a command server"},
		{"bad header name", "x", ServerConfig{URL: "https://x", Headers: map[string]config.SecretTemplate{"A B": "c"}}, `"A B" is not a valid header name`},
		{"header on two lines", "x", ServerConfig{URL: "https://x", Headers: map[string]config.SecretTemplate{"A": "b\r\nX-Evil: 1"}}, "headers.A: must be one line"},
		{"broken reference", "x", ServerConfig{URL: "https://x", Headers: map[string]config.SecretTemplate{"A": "Bearer ${TOKEN"}}, `"${" must open an environment variable reference`},
		{"bad env name", "x", ServerConfig{Command: "a", Env: map[string]config.SecretTemplate{"A=B": "c"}}, `"A=B" is not a valid variable name`},
		{"negative timeout", "x", ServerConfig{URL: "https://x", Timeout: -time.Second}, "timeout: must not be negative"},
		{"bad glob", "x", ServerConfig{URL: "https://x", Read: []string{"[a"}}, `read: "[a" is not a valid glob`},
		{"bad allow glob", "x", ServerConfig{URL: "https://x", Tools: ToolFilter{Allow: []string{"[a"}}}, `tools.allow: "[a" is not a valid glob`},
		{"name with double underscore", "a__b", ok, "servers.a__b: the name must be"},
		{"name ending in underscore", "a_", ok, "the name must be"},
		{"name with a dot", "a.b", ok, "the name must be"},
		{"name too long", strings.Repeat("a", 33), ok, "at most 32 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Config{Servers: map[string]ServerConfig{tt.server: tt.cfg}}.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate = %v, want %q", err, tt.want)
			case tt.want != "" && !strings.HasPrefix(err.Error(), "servers."+tt.server):
				t.Errorf("Validate = %v: the key is not named", err)
			}
		})
	}
	// Every problem at once.
	err := Config{Servers: map[string]ServerConfig{"a": {}, "b": {URL: "x"}}}.Validate()
	if err == nil || strings.Count(err.Error(), "\n") != 1 {
		t.Errorf("Validate = %v, want two problems", err)
	}
	// New names the keys as they are in the file.
	if _, err := New(Config{Servers: map[string]ServerConfig{"a": {}}}, Options{}); err == nil || !strings.HasPrefix(err.Error(), "tools.mcp.servers.a: ") {
		t.Errorf("New with an invalid config = %v", err)
	}
	if _, err := New(Config{}, Options{}); !errors.Is(err, ErrNoRegistry) {
		t.Errorf("New without a registry = %v", err)
	}
}

// Literal header and env values never print; references print as written,
// so that an operator sees which variable a value comes from; what the
// file says about a server stays readable.
func TestConfigPrintsNoHeaderOrEnvValue(t *testing.T) {
	cfg := Config{Servers: map[string]ServerConfig{
		"a": {URL: "https://x/mcp", Headers: map[string]config.SecretTemplate{"Authorization": "Bearer ghp_literal", "X-Ref": "Bearer ${TOKEN}"}},
		"b": {Command: "npx", Env: map[string]config.SecretTemplate{"API_KEY": "literal-env"}},
	}}
	y, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, printed := range []string{string(y), string(j), fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg)} {
		for _, value := range []string{"ghp_literal", "literal-env"} {
			if strings.Contains(printed, value) {
				t.Errorf("printed config shows %q:\n%s", value, printed)
			}
		}
		if !strings.Contains(printed, "https://x/mcp") || !strings.Contains(printed, "npx") || !strings.Contains(printed, "Bearer ${TOKEN}") {
			t.Errorf("printed config lost what is not secret:\n%s", printed)
		}
	}
}
