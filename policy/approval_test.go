package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/config"
)

// TestApprovalResolvesPerLevel: tools.approve, tools.approve_writes,
// approvers and approval_timeout are fields like the others: the most
// specific level that sets one decides it.
func TestApprovalResolvesPerLevel(t *testing.T) {
	pol := Config{
		Default: config.Level{Tools: config.ToolRules{Approve: []string{"deploy_*"}}},
		Platforms: map[string]PlatformPolicy{
			"slack": {
				Level: config.Level{Tools: config.ToolRules{ApproveWrites: new(true)}, Admins: []string{"UADMIN"}, ApprovalTimeout: new(2 * time.Minute)},
				Workspaces: map[string]WorkspacePolicy{"T1": {
					Level: config.Level{Approvers: config.Approvers{Users: []string{"UOPS"}, Requester: new(false)}},
					Chats: map[string]config.Level{"C1": {Tools: config.ToolRules{Approve: []string{}, ApproveWrites: new(false)}}},
				}},
			},
		},
	}
	r := New(pol)
	tests := []struct {
		scope  Scope
		tool   string
		writes bool
		want   bool
		rule   string
		level  string
	}{
		{Scope{Channel: "feishu"}, "deploy_prod", false, true, `tools.approve "deploy_*"`, "policies.default"},
		{Scope{Channel: "feishu"}, "save_skill_reference", true, false, "no approval", LevelBuiltin},
		{Scope{Channel: "slack", Workspace: "T2"}, "save_skill_reference", true, true, "tools.approve_writes: true", "policies.platforms.slack"},
		{Scope{Channel: "slack", Workspace: "T2"}, "load_skill", false, false, "no approval", LevelBuiltin},
		{Scope{Channel: "slack", Workspace: "T1", Chat: "C1"}, "deploy_prod", false, false, "no approval", LevelBuiltin},
		{Scope{Channel: "slack", Workspace: "T1", Chat: "C1"}, "save_skill_reference", true, false, "no approval", LevelBuiltin},
	}
	for _, tt := range tests {
		needed, why := r.Resolve(tt.scope).Approval(tt.tool, tt.writes)
		if needed != tt.want || why.Rule != tt.rule || why.Level != tt.level {
			t.Errorf("%+v %s: Approval = %v %+v, want %v %q %q", tt.scope, tt.tool, needed, why, tt.want, tt.rule, tt.level)
		}
	}

	if got := r.Resolve(Scope{Channel: "feishu"}).ApprovalTimeout(); got != DefaultApprovalTimeout {
		t.Errorf("default timeout %s, want %s", got, DefaultApprovalTimeout)
	}
	if got := r.Resolve(Scope{Channel: "slack", Workspace: "T1"}).ApprovalTimeout(); got != 2*time.Minute {
		t.Errorf("slack timeout %s, want 2m", got)
	}

	approvers := []struct {
		scope           Scope
		user, requester string
		want            bool
	}{
		// Default: the admins here, and the requester.
		{Scope{Channel: "slack", Workspace: "T2"}, "UADMIN", "U1", true},
		{Scope{Channel: "slack", Workspace: "T2"}, "U1", "U1", true},
		{Scope{Channel: "slack", Workspace: "T2"}, "U2", "U1", false},
		{Scope{Channel: "slack", Workspace: "T2"}, "", "", false},
		// approvers.users replaces the admins; requester: false excludes
		// the requester even when named.
		{Scope{Channel: "slack", Workspace: "T1", Chat: "C1"}, "UOPS", "U1", true},
		{Scope{Channel: "slack", Workspace: "T1", Chat: "C1"}, "UADMIN", "U1", false},
		{Scope{Channel: "slack", Workspace: "T1", Chat: "C1"}, "U1", "U1", false},
		// A platform's bare id is not another platform's user.
		{Scope{Channel: "feishu"}, "UADMIN", "U1", false},
	}
	for _, tt := range approvers {
		if got := r.Resolve(tt.scope).MayApprove(tt.user, tt.requester); got != tt.want {
			t.Errorf("%+v: MayApprove(%q, requester %q) = %v, want %v", tt.scope, tt.user, tt.requester, got, tt.want)
		}
	}

	tools := []ToolInfo{{Name: "save_skill_reference", Writes: true}, {Name: "load_skill"}, {Name: "deploy_prod"}}
	out := explain(t, pol, Scope{Channel: "slack", Workspace: "T1", Chat: "X"}, tools, nil)
	wantAll(t, out, "APPROVALS", "timeout: 2m0s (policies.platforms.slack)")
	for _, l := range []struct{ first, rest string }{
		{"save_skill_reference", "tools.approve_writes: true policies.platforms.slack"},
		{"deploy_prod", `tools.approve "deploy_*" policies.default`},
		{"approvers", "UOPS policies.platforms.slack.workspaces.T1"},
		{"requester", "may not approve their own calls policies.platforms.slack.workspaces.T1"},
	} {
		got := strings.Join(strings.Fields(line(t, out[strings.Index(out, "APPROVALS"):], l.first)), " ")
		if got != l.first+" "+l.rest {
			t.Errorf("explain line %q, want %q", got, l.first+" "+l.rest)
		}
	}
	if strings.Contains(out[strings.Index(out, "APPROVALS"):], "load_skill") {
		t.Errorf("a tool without approval is listed under APPROVALS:\n%s", out)
	}
}

// TestApprovalConfigIsValidated: a timeout that is not positive, a glob
// that cannot match, and an approver of another platform are errors that
// name the key.
func TestApprovalConfigIsValidated(t *testing.T) {
	cfg := config.Default()
	FromConfig(cfg).Default.Approvers.Users = []string{"U1"}
	FromConfig(cfg).Platforms = map[string]PlatformPolicy{"slack": {Level: config.Level{
		ApprovalTimeout: new(time.Duration(0)),
		Tools:           config.ToolRules{Approve: []string{"[bad"}},
		Approvers:       config.Approvers{Users: []string{"feishu:ou_1"}},
	}}}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad approval config")
	}
	wantAll(t, err.Error(), "policies.platforms.slack.approval_timeout: must be positive",
		`policies.platforms.slack.tools.approve: "[bad" is not a valid name or glob`,
		`policies.platforms.slack.approvers.users: "feishu:ou_1" names platform feishu`,
		`policies.default.approvers.users: "U1" must name its platform`)
}
