package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/config"
)

// TestAccountLevelSitsBetweenPlatformAndWorkspace: an account's level
// decides over its platform's for what reaches that app, a workspace or
// chat below still decides over it, and another app of the platform (or
// the default account) never sees it. "The HR app has no tools" is one
// line.
func TestAccountLevelSitsBetweenPlatformAndWorkspace(t *testing.T) {
	pol := Config{
		Platforms: map[string]PlatformPolicy{
			"slack": {
				Level:    config.Level{Model: "platform"},
				Accounts: map[string]config.Level{"hr": {Model: "hr", Tools: config.ToolRules{Allow: config.Names{}}}},
				Workspaces: map[string]WorkspacePolicy{"T1": {
					Chats: map[string]config.Level{"C_VIP": {Model: "vip"}},
				}},
			},
		},
	}
	r := New(pol)
	for _, tt := range []struct {
		scope       Scope
		model, from string
	}{
		{Scope{Channel: "slack", Workspace: "T1", Chat: "C1"}, "platform", "policies.platforms.slack"},
		{Scope{Channel: "slack", Account: "ops", Workspace: "T1", Chat: "C1"}, "platform", "policies.platforms.slack"},
		{Scope{Channel: "slack", Account: "hr", Workspace: "T1", Chat: "C1"}, "hr", "policies.platforms.slack.accounts.hr"},
		{Scope{Channel: "slack", Account: "hr", Workspace: "T1", Chat: "C_VIP"}, "vip", "policies.platforms.slack.workspaces.T1.chats.C_VIP"},
	} {
		e := r.Resolve(tt.scope)
		if e.ModelKey() != tt.model || e.Model().Level != tt.from {
			t.Errorf("%+v: model %q from %q, want %q from %q", tt.scope, e.ModelKey(), e.Model().Level, tt.model, tt.from)
		}
	}
	hr := r.Resolve(Scope{Channel: "slack", Account: "hr", Workspace: "T1", Chat: "C1"})
	if d := hr.Tool("web_fetch", false); d.Allowed {
		t.Errorf("the HR app may call web_fetch: %+v", d)
	}
	ops := r.Resolve(Scope{Channel: "slack", Account: "ops", Workspace: "T1", Chat: "C1"})
	if d := ops.Tool("web_fetch", false); !d.Allowed {
		t.Errorf("the ops app may not call web_fetch: %+v", d)
	}
	var b strings.Builder
	if err := r.Explain(&b, Scope{Channel: "slack", Account: "hr", Workspace: "T1", Chat: "C1"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "hr  policies.platforms.slack.accounts.hr\n") {
		t.Errorf("explain does not name the account's level:\n%s", b.String())
	}
}

// TestAccountLevelMustNameAnAccount: a level naming an account the
// platform's section does not configure is a config error with its key
// and line; one naming a configured account loads.
func TestAccountLevelMustNameAnAccount(t *testing.T) {
	const slack = `slack:
  bot_token: xoxb-one
  signing_secret: s1
  accounts:
    hr:
      bot_token: xoxb-two
      signing_secret: s2
policies:
  platforms:
    slack:
      accounts:
`
	path := filepath.Join(t.TempDir(), "parley.yaml")
	for _, tt := range []struct{ account, want string }{
		{"ops", ": policies.platforms.slack.accounts.ops: unknown account (the slack section configures default, hr)"},
		{"hr", ""},
		{"default", ""},
	} {
		if err := os.WriteFile(path, []byte(slack+"        "+tt.account+":\n          model: default\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := config.Load(path, func(string) string { return "" })
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.account, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "line ")):
			t.Errorf("%s: error %v, want %q", tt.account, err, tt.want)
		}
	}
}
