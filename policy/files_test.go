package policy

import (
	"testing"

	"github.com/parleyhq/parley/config"
)

// TestFilesSendDecidesTheSendClass: send_file, of the class send, is
// offered by default, refused where a level sets files.send: false (and
// named by that rule and level), still removed by tools.deny, and not a
// write: tools.write: false keeps it; explain shows the class and the key.
func TestFilesSendDecidesTheSendClass(t *testing.T) {
	t.Parallel()
	send := ToolInfo{Name: "send_file", Sends: true}
	pol := Config{
		Default: config.Level{Tools: config.ToolRules{Write: new(false)}},
		Platforms: map[string]PlatformPolicy{
			"slack":  {Level: config.Level{Files: config.FileRules{Send: new(false)}}, Workspaces: map[string]WorkspacePolicy{"T2": {Level: config.Level{Files: config.FileRules{Send: new(true)}}}}},
			"feishu": {Level: config.Level{Tools: config.ToolRules{Deny: []string{"send_*"}}}},
		},
	}
	r := New(pol)
	for _, tt := range []struct {
		scope   Scope
		allowed bool
		rule    string
		set     bool
	}{
		{Scope{Channel: "console"}, true, RuleDefaultAllowed, false},
		{Scope{Channel: "slack", Workspace: "T1"}, false, "files.send: false", true},
		{Scope{Channel: "slack", Workspace: "T2"}, true, RuleDefaultAllowed, true},
		{Scope{Channel: "feishu"}, false, `tools.deny "send_*"`, false},
	} {
		eff := r.Resolve(tt.scope)
		d := eff.Offer(send)
		if _, set := eff.FilesSend(); d.Allowed != tt.allowed || d.Rule != tt.rule || set != tt.set {
			t.Errorf("%+v: Offer = %+v (set %v); want allowed %v by %q (set %v)", tt.scope, d, set, tt.allowed, tt.rule, tt.set)
		}
	}
	out := explain(t, pol, Scope{Channel: "slack", Workspace: "T1"}, []ToolInfo{send}, nil)
	wantAll(t, line(t, out, "send_file"), "send", "DENIED", "files.send: false", "policies.platforms.slack")
	wantAll(t, out, "files.send: false (policies.platforms.slack)")
	out = explain(t, pol, Scope{Channel: "console"}, []ToolInfo{send}, nil)
	wantAll(t, out, "files.send: where the channel can send files (builtin default)")
}
