package config_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/mcp"
	"github.com/parleyhq/parley/agent/web"
	"github.com/parleyhq/parley/config"
)

const toolsFile = `tools:
  mcp:
    servers:
      github:
        url: https://api.githubcopilot.com/mcp/
        headers:
          Authorization: Bearer ${GITHUB_TOKEN}
          X-Literal: ghp_written_into_the_file
        read: ["get_*", "list_*"]
        timeout: 45s
      files:
        command: npx
        args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]
        env:
          FILES_TOKEN: ${FILES_TOKEN}
        tools:
          deny: [write_file]
  web_fetch:
    allow_private: [10.20.0.0/16, wiki.corp.example]
    max_bytes: 1048576
  web_search:
    provider: brave
`

// The tool sections are decoded into the tool packages' own types,
// overridden by their variables, printed by config check with literal
// secrets masked and references as written, and loaded again from what
// was printed.
func TestToolSectionsDecodeOverrideAndPrint(t *testing.T) {
	const key = "brave-key-must-not-show"
	cfg, err := config.Load(writeFile(t, toolsFile), env(map[string]string{"WEB_SEARCH_API_KEY": key}))
	if err != nil {
		t.Fatal(err)
	}
	m := mcp.FromConfig(cfg)
	gh, files := m.Servers["github"], m.Servers["files"]
	if gh.Headers["Authorization"].Reveal() != "Bearer ${GITHUB_TOKEN}" || gh.Timeout != 45*time.Second || !slices.Equal(gh.Read, []string{"get_*", "list_*"}) {
		t.Errorf("github = %+v", gh)
	}
	if files.Command != "npx" || len(files.Args) != 3 || !slices.Equal(files.Tools.Deny, []string{"write_file"}) {
		t.Errorf("files = %+v", files)
	}
	w := web.FromConfig(cfg)
	if !slices.Equal(w.Fetch.AllowPrivate, []string{"10.20.0.0/16", "wiki.corp.example"}) || w.Fetch.MaxBytes != 1<<20 || w.Fetch.Timeout != web.DefaultFetchTimeout {
		t.Errorf("web_fetch = %+v", w.Fetch)
	}
	if w.Search.Provider != "brave" || w.Search.APIKey.Reveal() != key || w.Search.MaxResults != web.DefaultMaxResults {
		t.Errorf("web_search = %+v", w.Search)
	}
	for _, v := range []string{"WEB_SEARCH_PROVIDER", "WEB_SEARCH_URL", "WEB_SEARCH_API_KEY"} {
		if !slices.Contains(config.EnvVars(), v) {
			t.Errorf("EnvVars lacks %s", v)
		}
	}

	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	printed := string(out)
	for _, want := range []string{"tools:\n", "Authorization: Bearer ${GITHUB_TOKEN}", "X-Literal: <secret>", "FILES_TOKEN: ${FILES_TOKEN}",
		"api_key: <secret>", "provider: brave", "- wiki.corp.example", "timeout: 30s"} {
		if !strings.Contains(printed, want) {
			t.Errorf("config check lacks %q:\n%s", want, printed)
		}
	}
	for _, secret := range []string{key, "ghp_written_into_the_file"} {
		if strings.Contains(printed, secret) {
			t.Errorf("config check shows %q:\n%s", secret, printed)
		}
	}
	again, err := config.Load(writeFile(t, printed), env(map[string]string{"WEB_SEARCH_API_KEY": key}))
	if err != nil {
		t.Fatalf("config check output does not load: %v\n%s", err, printed)
	}
	if a := mcp.FromConfig(again).Servers["github"]; a.URL != gh.URL || a.Headers["Authorization"] != gh.Headers["Authorization"] {
		t.Errorf("github loaded again = %+v", a)
	}

	// Without the file the sections have their defaults: web_fetch on,
	// web_search off, no servers.
	def, err := config.Load("", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if d := web.FromConfig(def); d.Search.Enabled() || d.Fetch.MaxBytes != web.DefaultMaxBytes || len(mcp.FromConfig(def).Servers) != 0 {
		t.Errorf("defaults = %+v, %+v", d, mcp.FromConfig(def))
	}
	// A null tools: key, or a null section, keeps the defaults.
	for _, file := range []string{"tools:\n", "tools:\n  web_fetch: ~\n"} {
		c, err := config.Load(writeFile(t, file), env(nil))
		if err != nil || web.FromConfig(c).Fetch.MaxBytes != web.DefaultMaxBytes {
			t.Errorf("%q: %v, %+v", file, err, web.FromConfig(c).Fetch)
		}
	}
}

// Problems in the tool sections are refused by Load (so by config check
// and serve alike), each under its key in the file, all at once.
func TestToolSectionErrorsNameTheKey(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown key", "tools:\n  mcp:\n    srvers: {}\n", `line 3: unknown key "srvers"`},
		{"unknown section", "tools:\n  shell: {}\n", `unknown key "shell"`},
		{"server without transport", "tools:\n  mcp:\n    servers:\n      gh: {}\n", "tools.mcp.servers.gh: set command"},
		{"server name", "tools:\n  mcp:\n    servers:\n      a__b: {url: https://x}\n", "tools.mcp.servers.a__b: the name must be"},
		{"broken reference", "tools:\n  mcp:\n    servers:\n      gh: {url: https://x, headers: {A: \"${TOKEN\"}}\n", "tools.mcp.servers.gh.headers.A"},
		{"allow list", "tools:\n  web_fetch:\n    allow_private: [0.0.0.0/0]\n", "tools.web_fetch.allow_private"},
		{"download cap", "tools:\n  web_fetch:\n    max_bytes: -1\n", "tools.web_fetch.max_bytes"},
		{"provider", "tools:\n  web_search:\n    provider: google\n", `tools.web_search.provider: "google"`},
		{"key missing", "tools:\n  web_search:\n    provider: tavily\n", "tools.web_search.api_key: required for provider tavily (or set WEB_SEARCH_API_KEY)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(writeFile(t, tt.yaml), env(nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load = %v; want %q", err, tt.want)
			}
		})
	}
	_, err := config.Load(writeFile(t, "tools:\n  mcp:\n    servers:\n      gh: {}\n  web_fetch:\n    max_bytes: -1\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "tools.mcp.servers.gh") || !strings.Contains(err.Error(), "tools.web_fetch.max_bytes") {
		t.Errorf("Load = %v; want both problems", err)
	}
}

func TestRegisterToolSectionRefusesMistakes(t *testing.T) {
	tests := []struct {
		name string
		s    config.ToolSection
	}{
		{"empty name", config.ToolSection{NewConfig: func() config.SectionConfig { return &mcp.Config{} }}},
		{"dotted name", config.ToolSection{Name: "a.b", NewConfig: func() config.SectionConfig { return &mcp.Config{} }}},
		{"no NewConfig", config.ToolSection{Name: "shell"}},
		{"twice", config.ToolSection{Name: "mcp", NewConfig: func() config.SectionConfig { return &mcp.Config{} }}},
		{"not a pointer", config.ToolSection{Name: "valuetool", NewConfig: func() config.SectionConfig { return valueSection{} }}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterToolSection(%+v) did not panic", tt.s)
				}
			}()
			config.RegisterToolSection(tt.s)
		})
	}
	// tools is a key of the file: no platform may take it.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("RegisterPlatform(tools) did not panic")
			}
		}()
		config.RegisterPlatform(config.Platform{Name: config.ToolsKey})
	}()
}
