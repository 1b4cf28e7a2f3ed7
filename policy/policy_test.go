package policy

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/parleyhq/parley/config"
)

// The scope most tests resolve, and the names of its four config levels,
// least specific first.
var (
	fullScope  = Scope{Channel: "slack", Workspace: "T1", Chat: "C1"}
	levelNames = []string{
		"policies.default",
		"policies.platforms.slack",
		"policies.platforms.slack.workspaces.T1",
		"policies.platforms.slack.workspaces.T1.chats.C1",
	}
)

// tree builds a slack policy tree in which each of the config levels 0..depth
// (default, platform, workspace, chat) is passed to set with its index, and
// the more specific levels exist but set nothing.
func tree(t testing.TB, depth int, set func(l *config.Level, i int)) Config {
	t.Helper()
	var ls [4]config.Level
	for i := 0; i <= depth; i++ {
		set(&ls[i], i)
	}
	return Config{
		Default: ls[0],
		Platforms: map[string]PlatformPolicy{
			"slack": {
				Level: ls[1],
				Workspaces: map[string]WorkspacePolicy{
					"T1": {Level: ls[2], Chats: map[string]config.Level{"C1": ls[3]}},
				},
			},
		},
	}
}

func checkDecision(t *testing.T, what string, got, want Decision) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

// TestOverridePerField checks, for every field and at every depth, that the
// most specific level setting a field decides it, that its list replaces
// (not extends) the lists above, and that the levels below inherit it.
func TestOverridePerField(t *testing.T) {
	name := func(prefix string, i int) string { return fmt.Sprintf("%s%d", prefix, i) }
	fields := []struct {
		field string
		set   func(l *config.Level, i int)
		check func(t *testing.T, e *Effective, d int, lvl string)
	}{
		{
			field: "tools.allow",
			set:   func(l *config.Level, i int) { l.Tools.Allow = []string{name("t", i)} },
			check: func(t *testing.T, e *Effective, d int, lvl string) {
				t.Helper()
				checkDecision(t, "own tool", e.Tool(name("t", d), false),
					Decision{Allowed: true, Rule: fmt.Sprintf("tools.allow %q", name("t", d)), Level: lvl})
				if d > 0 {
					checkDecision(t, "tool allowed above", e.Tool(name("t", d-1), false),
						Decision{Rule: "not in tools.allow", Level: lvl})
				}
			},
		},
		{
			field: "tools.deny",
			set:   func(l *config.Level, i int) { l.Tools.Deny = []string{name("t", i)} },
			check: func(t *testing.T, e *Effective, d int, lvl string) {
				t.Helper()
				checkDecision(t, "own tool", e.Tool(name("t", d), false),
					Decision{Rule: fmt.Sprintf("tools.deny %q", name("t", d)), Level: lvl})
				if d > 0 {
					checkDecision(t, "tool denied above", e.Tool(name("t", d-1), false),
						Decision{Allowed: true, Rule: RuleDefaultAllowed, Level: LevelBuiltin})
				}
			},
		},
		{
			field: "tools.write",
			// Alternate so that every level differs from the one above.
			set: func(l *config.Level, i int) { l.Tools.Write = new(i%2 == 1) },
			check: func(t *testing.T, e *Effective, d int, lvl string) {
				t.Helper()
				want := Decision{Rule: "tools.write: false", Level: lvl}
				if d%2 == 1 {
					want = Decision{Allowed: true, Rule: "tools.write: true", Level: lvl}
				}
				checkDecision(t, "write tool", e.Tool("w", true), want)
				checkDecision(t, "read tool", e.Tool("r", false),
					Decision{Allowed: true, Rule: RuleDefaultAllowed, Level: LevelBuiltin})
			},
		},
		{
			field: "skills.allow",
			set:   func(l *config.Level, i int) { l.Skills.Allow = []string{name("s", i)} },
			check: func(t *testing.T, e *Effective, d int, lvl string) {
				t.Helper()
				checkDecision(t, "own skill", e.Skill(name("s", d)),
					Decision{Allowed: true, Rule: fmt.Sprintf("skills.allow %q", name("s", d)), Level: lvl})
				if d > 0 {
					checkDecision(t, "skill allowed above", e.Skill(name("s", d-1)),
						Decision{Rule: "not in skills.allow", Level: lvl})
				}
			},
		},
		{
			field: "skills.deny",
			set:   func(l *config.Level, i int) { l.Skills.Deny = []string{name("s", i)} },
			check: func(t *testing.T, e *Effective, d int, lvl string) {
				t.Helper()
				checkDecision(t, "own skill", e.Skill(name("s", d)),
					Decision{Rule: fmt.Sprintf("skills.deny %q", name("s", d)), Level: lvl})
				if d > 0 {
					checkDecision(t, "skill denied above", e.Skill(name("s", d-1)),
						Decision{Allowed: true, Rule: RuleDefaultAllowed, Level: LevelBuiltin})
				}
			},
		},
		{
			field: "access.users",
			set:   func(l *config.Level, i int) { l.Access.Users = []string{name("u", i)} },
			check: func(t *testing.T, e *Effective, d int, lvl string) {
				t.Helper()
				checkDecision(t, "own user", e.Access(name("u", d), "C1", false),
					Decision{Allowed: true, Rule: "access.users", Level: lvl})
				if d > 0 {
					checkDecision(t, "user allowed above", e.Access(name("u", d-1), "C1", false),
						Decision{Rule: "not in access.users", Level: lvl})
				}
			},
		},
		{
			field: "access.chats",
			set:   func(l *config.Level, i int) { l.Access.Chats = []string{name("c", i)} },
			check: func(t *testing.T, e *Effective, d int, lvl string) {
				t.Helper()
				checkDecision(t, "own chat", e.Access("U", name("c", d), false),
					Decision{Allowed: true, Rule: "access.chats", Level: lvl})
				if d > 0 {
					checkDecision(t, "chat allowed above", e.Access("U", name("c", d-1), false),
						Decision{Rule: "not in access.chats", Level: lvl})
				}
			},
		},
		{
			field: "access.dms",
			set:   func(l *config.Level, i int) { l.Access.DMs = new(i%2 == 1) },
			check: func(t *testing.T, e *Effective, d int, lvl string) {
				t.Helper()
				want := Decision{Rule: "access.dms: false", Level: lvl}
				if d%2 == 1 {
					want = Decision{Allowed: true, Rule: "access.dms: true", Level: lvl}
				}
				checkDecision(t, "dm", e.Access("U", "D1", true), want)
			},
		},
		{
			field: "admins",
			set:   func(l *config.Level, i int) { l.Admins = []string{name("a", i)} },
			check: func(t *testing.T, e *Effective, d int, _ string) {
				t.Helper()
				if d == 0 {
					// A bare id at policies.default names no platform's
					// user; the validation of the file refuses it.
					if e.IsAdmin(name("a", d)) {
						t.Errorf("IsAdmin(%s) = true for a bare id in policies.default", name("a", d))
					}
					return
				}
				if !e.IsAdmin(name("a", d)) {
					t.Errorf("IsAdmin(%s) = false, want true", name("a", d))
				}
				if d > 0 && e.IsAdmin(name("a", d-1)) {
					t.Errorf("IsAdmin(%s) = true, want false: admins are replaced, not merged", name("a", d-1))
				}
				if got, want := e.Admins(), []string{name("a", d)}; !slices.Equal(got, want) {
					t.Errorf("Admins() = %q, want %q", got, want)
				}
			},
		},
	}
	for _, f := range fields {
		for d, lvl := range levelNames {
			t.Run(fmt.Sprintf("%s/set down to %s", f.field, lvl), func(t *testing.T) {
				e := New(tree(t, d, f.set)).Resolve(fullScope)
				f.check(t, e, d, lvl)
			})
		}
	}
}

func TestToolDecisions(t *testing.T) {
	wechatChat := func(l config.Level) Config {
		return Config{Platforms: map[string]PlatformPolicy{
			"wechat": {Workspaces: map[string]WorkspacePolicy{
				"acct": {Chats: map[string]config.Level{"u42": l}},
			}},
		}}
	}
	tests := []struct {
		name   string
		pol    Config
		scope  Scope
		tool   string
		writes bool
		want   Decision
	}{
		{
			name:  "empty config allows everything",
			scope: Scope{Channel: "slack"},
			tool:  "load_skill",
			want:  Decision{Allowed: true, Rule: RuleDefaultAllowed, Level: LevelBuiltin},
		},
		{
			name: "deny beats allow at the same level",
			pol: Config{Default: config.Level{Tools: config.ToolRules{
				Allow: []string{"*"}, Deny: []string{"save_*"},
			}}},
			scope: Scope{Channel: "slack"},
			tool:  "save_skill_reference", writes: true,
			want: Decision{Rule: `tools.deny "save_*"`, Level: "policies.default"},
		},
		{
			name: "deny above beats a more specific allow",
			pol: tree(t, 3, func(l *config.Level, i int) {
				switch i {
				case 0:
					l.Tools.Deny = []string{"shell"}
				case 3:
					l.Tools.Allow = []string{"shell"}
				}
			}),
			scope: fullScope,
			tool:  "shell",
			want:  Decision{Rule: `tools.deny "shell"`, Level: "policies.default"},
		},
		{
			name: "more specific deny beats an allow above",
			pol: tree(t, 3, func(l *config.Level, i int) {
				switch i {
				case 1:
					l.Tools.Allow = []string{"shell", "load_skill"}
				case 3:
					l.Tools.Deny = []string{"shell"}
				}
			}),
			scope: fullScope,
			tool:  "shell",
			want:  Decision{Rule: `tools.deny "shell"`, Level: levelNames[3]},
		},
		{
			name:  "deny star denies every tool",
			pol:   Config{Default: config.Level{Tools: config.ToolRules{Deny: []string{"*"}}}},
			scope: Scope{Channel: "feishu"},
			tool:  "load_skill",
			want:  Decision{Rule: `tools.deny "*"`, Level: "policies.default"},
		},
		{
			name: "allow glob matches",
			pol: Config{Platforms: map[string]PlatformPolicy{
				"feishu": {Level: config.Level{Tools: config.ToolRules{Allow: []string{"find_*", "load_*"}}}},
			}},
			scope: Scope{Channel: "feishu"},
			tool:  "load_skill",
			want:  Decision{Allowed: true, Rule: `tools.allow "load_*"`, Level: "policies.platforms.feishu"},
		},
		{
			name: "allow glob does not match",
			pol: Config{Platforms: map[string]PlatformPolicy{
				"feishu": {Level: config.Level{Tools: config.ToolRules{Allow: []string{"find_*", "load_*"}}}},
			}},
			scope: Scope{Channel: "feishu"},
			tool:  "save_skill_reference", writes: true,
			want: Decision{Rule: "not in tools.allow", Level: "policies.platforms.feishu"},
		},
		{
			name:  "empty allow list allows nothing",
			pol:   Config{Default: config.Level{Tools: config.ToolRules{Allow: []string{}}}},
			scope: Scope{Channel: "console"},
			tool:  "load_skill",
			want:  Decision{Rule: "not in tools.allow", Level: "policies.default"},
		},
		{
			name: "empty allow list at chat overrides allow star above",
			pol: tree(t, 3, func(l *config.Level, i int) {
				if i == 0 {
					l.Tools.Allow = []string{"*"}
				}
				if i == 3 {
					l.Tools.Allow = []string{}
				}
			}),
			scope: fullScope,
			tool:  "load_skill",
			want:  Decision{Rule: "not in tools.allow", Level: levelNames[3]},
		},
		{
			name: "empty deny list at chat lifts a deny above",
			pol: tree(t, 3, func(l *config.Level, i int) {
				if i == 3 {
					l.Tools.Deny = []string{}
					return
				}
				l.Tools.Deny = []string{"shell"}
			}),
			scope: fullScope,
			tool:  "shell",
			want:  Decision{Allowed: true, Rule: RuleDefaultAllowed, Level: LevelBuiltin},
		},
		{
			name:  "wechat drops write tools by default",
			scope: Scope{Channel: "wechat", Workspace: "acct", Chat: "u1"},
			tool:  "save_skill_reference", writes: true,
			want: Decision{Rule: "tools.write: false", Level: "builtin wechat default"},
		},
		{
			name:  "wechat keeps read tools",
			scope: Scope{Channel: "wechat"},
			tool:  "load_skill",
			want:  Decision{Allowed: true, Rule: RuleDefaultAllowed, Level: LevelBuiltin},
		},
		{
			name:  "slack keeps write tools",
			scope: Scope{Channel: "slack", Workspace: "T1", Chat: "C1"},
			tool:  "save_skill_reference", writes: true,
			want: Decision{Allowed: true, Rule: RuleDefaultAllowed, Level: LevelBuiltin},
		},
		{
			name:  "operator re-enables writes for one wechat chat",
			pol:   wechatChat(config.Level{Tools: config.ToolRules{Write: new(true)}}),
			scope: Scope{Channel: "wechat", Workspace: "acct", Chat: "u42"},
			tool:  "save_skill_reference", writes: true,
			want: Decision{Allowed: true, Rule: "tools.write: true", Level: "policies.platforms.wechat.workspaces.acct.chats.u42"},
		},
		{
			name:  "re-enabled chat does not leak to its neighbours",
			pol:   wechatChat(config.Level{Tools: config.ToolRules{Write: new(true)}}),
			scope: Scope{Channel: "wechat", Workspace: "acct", Chat: "u43"},
			tool:  "save_skill_reference", writes: true,
			want: Decision{Rule: "tools.write: false", Level: "builtin wechat default"},
		},
		{
			name: "operator write false on wechat names the config level",
			pol: Config{Platforms: map[string]PlatformPolicy{
				"wechat": {Level: config.Level{Tools: config.ToolRules{Write: new(false)}}},
			}},
			scope: Scope{Channel: "wechat"},
			tool:  "save_skill_reference", writes: true,
			want: Decision{Rule: "tools.write: false", Level: "policies.platforms.wechat"},
		},
		{
			// The builtin wechat default sits above policies.default: a
			// global write: true does not reopen wechat.
			name:  "global write true does not override the builtin wechat default",
			pol:   Config{Default: config.Level{Tools: config.ToolRules{Write: new(true)}}},
			scope: Scope{Channel: "wechat"},
			tool:  "save_skill_reference", writes: true,
			want: Decision{Allowed: false, Rule: "tools.write: false", Level: "builtin wechat default"},
		},
		{
			name: "write false beats an explicit allow",
			pol: Config{Platforms: map[string]PlatformPolicy{
				"wechat": {Level: config.Level{Tools: config.ToolRules{Allow: []string{"save_skill_reference"}}}},
			}},
			scope: Scope{Channel: "wechat"},
			tool:  "save_skill_reference", writes: true,
			want: Decision{Rule: "tools.write: false", Level: "builtin wechat default"},
		},
		{
			name: "allow match is reported before write true",
			pol: Config{Default: config.Level{Tools: config.ToolRules{
				Allow: []string{"save_*"}, Write: new(true),
			}}},
			scope: Scope{Channel: "slack"},
			tool:  "save_skill_reference", writes: true,
			want: Decision{Allowed: true, Rule: `tools.allow "save_*"`, Level: "policies.default"},
		},
		{
			name: "unknown platform uses only the default levels",
			pol: Config{
				Default: config.Level{Tools: config.ToolRules{Deny: []string{"shell"}}},
				// Not valid config, but a Resolver must not trust validation.
				Platforms: map[string]PlatformPolicy{
					"irc": {Level: config.Level{Tools: config.ToolRules{Deny: []string{"load_skill"}}}},
				},
			},
			scope: Scope{Channel: "irc", Workspace: "w", Chat: "c"},
			tool:  "load_skill",
			want:  Decision{Allowed: true, Rule: RuleDefaultAllowed, Level: LevelBuiltin},
		},
		{
			name:  "platform names are case-sensitive",
			scope: Scope{Channel: "WeChat"},
			tool:  "save_skill_reference", writes: true,
			want: Decision{Allowed: true, Rule: RuleDefaultAllowed, Level: LevelBuiltin},
		},
		{
			name:  "malformed glob matches only itself",
			pol:   Config{Default: config.Level{Tools: config.ToolRules{Deny: []string{"["}}}},
			scope: Scope{Channel: "slack"},
			tool:  "load_skill",
			want:  Decision{Allowed: true, Rule: RuleDefaultAllowed, Level: LevelBuiltin},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := New(tt.pol).Resolve(tt.scope).Tool(tt.tool, tt.writes)
			checkDecision(t, fmt.Sprintf("Tool(%q, %t)", tt.tool, tt.writes), got, tt.want)
		})
	}
}

func TestSkillDecisions(t *testing.T) {
	tests := []struct {
		name  string
		pol   Config
		skill string
		want  Decision
	}{
		{
			name:  "unset allows every skill",
			skill: "pdf",
			want:  Decision{Allowed: true, Rule: RuleDefaultAllowed, Level: LevelBuiltin},
		},
		{
			name:  "allow glob",
			pol:   Config{Default: config.Level{Skills: config.SkillRules{Allow: []string{"doc-*"}}}},
			skill: "doc-writer",
			want:  Decision{Allowed: true, Rule: `skills.allow "doc-*"`, Level: "policies.default"},
		},
		{
			name:  "not in allow list",
			pol:   Config{Default: config.Level{Skills: config.SkillRules{Allow: []string{"doc-*"}}}},
			skill: "pdf",
			want:  Decision{Rule: "not in skills.allow", Level: "policies.default"},
		},
		{
			name:  "empty allow list hides every skill",
			pol:   Config{Default: config.Level{Skills: config.SkillRules{Allow: []string{}}}},
			skill: "pdf",
			want:  Decision{Rule: "not in skills.allow", Level: "policies.default"},
		},
		{
			name: "deny beats allow at the same level",
			pol: Config{Default: config.Level{Skills: config.SkillRules{
				Allow: []string{"*"}, Deny: []string{"pdf"},
			}}},
			skill: "pdf",
			want:  Decision{Rule: `skills.deny "pdf"`, Level: "policies.default"},
		},
		{
			name: "platform deny beats chat allow",
			pol: tree(t, 3, func(l *config.Level, i int) {
				switch i {
				case 1:
					l.Skills.Deny = []string{"p*"}
				case 3:
					l.Skills.Allow = []string{"pdf"}
				}
			}),
			skill: "pdf",
			want:  Decision{Rule: `skills.deny "p*"`, Level: levelNames[1]},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := New(tt.pol).Resolve(fullScope).Skill(tt.skill)
			checkDecision(t, fmt.Sprintf("Skill(%q)", tt.skill), got, tt.want)
		})
	}
}

func TestAccess(t *testing.T) {
	access := func(a config.Access) Config {
		return Config{Platforms: map[string]PlatformPolicy{"slack": {Level: config.Level{Access: a}}}}
	}
	const plat = "policies.platforms.slack"
	tests := []struct {
		name       string
		pol        Config
		user, chat string
		dm         bool
		want       Decision
	}{
		{
			name: "unset lets everyone in",
			user: "U1", chat: "C1",
			want: Decision{Allowed: true, Rule: RuleDefaultEveryone, Level: LevelBuiltin},
		},
		{
			name: "unset lets everyone DM",
			user: "U1", chat: "D1", dm: true,
			want: Decision{Allowed: true, Rule: RuleDefaultEveryone, Level: LevelBuiltin},
		},
		{
			name: "user on the allowlist",
			pol:  access(config.Access{Users: []string{"U1", "U2"}}),
			user: "U2", chat: "C1",
			want: Decision{Allowed: true, Rule: "access.users", Level: plat},
		},
		{
			name: "user off the allowlist",
			pol:  access(config.Access{Users: []string{"U1", "U2"}}),
			user: "U3", chat: "C1",
			want: Decision{Rule: "not in access.users", Level: plat},
		},
		{
			name: "user allowlist applies to DMs too",
			pol:  access(config.Access{Users: []string{"U1"}}),
			user: "U3", chat: "D1", dm: true,
			want: Decision{Rule: "not in access.users", Level: plat},
		},
		{
			name: "user ids are not globs",
			pol:  access(config.Access{Users: []string{"U*"}}),
			user: "U1", chat: "C1",
			want: Decision{Rule: "not in access.users", Level: plat},
		},
		{
			name: "empty user allowlist lets everyone in",
			pol:  access(config.Access{Users: []string{}}),
			user: "U9", chat: "C1",
			want: Decision{Allowed: true, Rule: RuleDefaultEveryone, Level: LevelBuiltin},
		},
		{
			name: "empty user list at chat lifts a platform allowlist",
			pol: tree(t, 3, func(l *config.Level, i int) {
				if i == 1 {
					l.Access.Users = []string{"U1"}
				}
				if i == 3 {
					l.Access.Users = []string{}
				}
			}),
			user: "U9", chat: "C1",
			want: Decision{Allowed: true, Rule: RuleDefaultEveryone, Level: LevelBuiltin},
		},
		{
			name: "chat on the allowlist",
			pol:  access(config.Access{Chats: []string{"C1"}}),
			user: "U1", chat: "C1",
			want: Decision{Allowed: true, Rule: "access.chats", Level: plat},
		},
		{
			name: "chat off the allowlist",
			pol:  access(config.Access{Chats: []string{"C1"}}),
			user: "U1", chat: "C2",
			want: Decision{Rule: "not in access.chats", Level: plat},
		},
		{
			name: "chat allowlist does not apply to DMs",
			pol:  access(config.Access{Chats: []string{"C1"}}),
			user: "U1", chat: "D1", dm: true,
			want: Decision{Allowed: true, Rule: RuleDefaultEveryone, Level: LevelBuiltin},
		},
		{
			name: "DMs off",
			pol:  access(config.Access{DMs: new(false)}),
			user: "U1", chat: "D1", dm: true,
			want: Decision{Rule: "access.dms: false", Level: plat},
		},
		{
			name: "DMs off leaves chats alone",
			pol:  access(config.Access{DMs: new(false)}),
			user: "U1", chat: "C1",
			want: Decision{Allowed: true, Rule: RuleDefaultEveryone, Level: LevelBuiltin},
		},
		{
			name: "listed user in an unlisted chat",
			pol:  access(config.Access{Users: []string{"U1"}, Chats: []string{"C1"}}),
			user: "U1", chat: "C2",
			want: Decision{Rule: "not in access.chats", Level: plat},
		},
		{
			name: "listed user, DMs off",
			pol:  access(config.Access{Users: []string{"U1"}, DMs: new(false)}),
			user: "U1", chat: "D1", dm: true,
			want: Decision{Rule: "access.dms: false", Level: plat},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := New(tt.pol).Resolve(fullScope).Access(tt.user, tt.chat, tt.dm)
			checkDecision(t, fmt.Sprintf("Access(%q, %q, %t)", tt.user, tt.chat, tt.dm), got, tt.want)
		})
	}
}

func TestAdmins(t *testing.T) {
	pol := Config{
		Default: config.Level{Admins: []string{"console:root", "root"}},
		Platforms: map[string]PlatformPolicy{
			"slack": {
				Level: config.Level{Admins: []string{"U_OPS", "U_LEAD", "feishu:ou_lead"}},
				Workspaces: map[string]WorkspacePolicy{
					"T1": {Chats: map[string]config.Level{
						"C_NOADMIN": {Admins: []string{}},
						"C_OWN":     {Admins: []string{"U_OWNER"}},
					}},
				},
			},
			"feishu": {Level: config.Level{Admins: []string{"ou_*"}}},
		},
	}
	r := New(pol)
	tests := []struct {
		name      string
		scope     Scope
		want      []string
		admin     []string
		notAdmins []string
	}{
		{"global default, matched on its platform", Scope{Channel: "console"}, []string{"console:root", "root"}, []string{"root"}, []string{"U_OPS", "", "console:root"}},
		{"platform replaces default", Scope{Channel: "slack"}, []string{"U_OPS", "U_LEAD", "feishu:ou_lead"}, []string{"U_OPS", "U_LEAD"}, []string{"root", "ou_lead"}},
		{"inherited by unconfigured chat", Scope{Channel: "slack", Workspace: "T1", Chat: "C9"}, []string{"U_OPS", "U_LEAD", "feishu:ou_lead"}, []string{"U_LEAD"}, []string{"root"}},
		{"chat replaces platform", Scope{Channel: "slack", Workspace: "T1", Chat: "C_OWN"}, []string{"U_OWNER"}, []string{"U_OWNER"}, []string{"U_OPS"}},
		{"empty list at chat means no admins", Scope{Channel: "slack", Workspace: "T1", Chat: "C_NOADMIN"}, []string{}, nil, []string{"U_OPS", "root"}},
		{"admin ids are not globs", Scope{Channel: "feishu"}, []string{"ou_*"}, []string{"ou_*"}, []string{"ou_123"}},
		{"unknown platform gets the default, which names no user of it", Scope{Channel: "irc"}, []string{"console:root", "root"}, nil, []string{"root"}},
		{"a global entry names its platform", Scope{Channel: "feishu"}, []string{"ou_*"}, nil, []string{"root"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := r.Resolve(tt.scope)
			if got := e.Admins(); !slices.Equal(got, tt.want) {
				t.Errorf("Admins() = %q, want %q", got, tt.want)
			}
			for _, u := range tt.admin {
				if !e.IsAdmin(u) {
					t.Errorf("IsAdmin(%q) = false, want true", u)
				}
			}
			for _, u := range tt.notAdmins {
				if e.IsAdmin(u) {
					t.Errorf("IsAdmin(%q) = true, want false", u)
				}
			}
		})
	}
}

// TestTerminalUserAdministersTheConsole: the operator a Resolver is
// given may run the admin commands of every conversation of their
// platform, also one whose chat level names other admins (who stay
// admins), and of no other platform's; they are no global admin by it.
func TestTerminalUserAdministersTheConsole(t *testing.T) {
	pol := Config{Platforms: map[string]PlatformPolicy{
		"console": {Workspaces: map[string]WorkspacePolicy{"": {Chats: map[string]config.Level{"c2": {Admins: []string{"bob"}}}}}},
	}}
	r := New(pol).WithOperator("console", "alice")
	for _, chat := range []string{"c1", "c2"} {
		if e := r.Resolve(Scope{Channel: "console", Chat: chat}); !e.IsOperator("alice") || e.IsGlobalAdmin("alice") || e.IsOperator("mallory") {
			t.Errorf("console chat %s: alice operator %t, global %t, mallory operator %t; want true, false, false", chat, e.IsOperator("alice"), e.IsGlobalAdmin("alice"), e.IsOperator("mallory"))
		}
	}
	if !r.Resolve(Scope{Channel: "console", Chat: "c2"}).IsAdmin("bob") {
		t.Error("the chat's own admin bob is no admin beside the operator")
	}
	if r.Resolve(Scope{Channel: "slack", Workspace: "T1", Chat: "C1"}).IsOperator("alice") {
		t.Error("the console's operator administers Slack")
	}
	if New(pol).Resolve(Scope{Channel: "console", Chat: "c1"}).IsOperator("alice") {
		t.Error("without an operator, alice administers the console")
	}
}

// TestIsolation checks that neither the caller's config nor a caller
// modifying Admins() can change later decisions.
func TestIsolation(t *testing.T) {
	pol := Config{Default: config.Level{
		Admins: []string{"slack:root"},
		Tools:  config.ToolRules{Deny: []string{"shell"}},
	}}
	r := New(pol)
	pol.Default.Admins[0] = "slack:mallory"
	pol.Default.Tools.Deny[0] = "other"
	pol.Platforms = map[string]PlatformPolicy{"slack": {Level: config.Level{Admins: []string{"eve"}}}}

	e := r.Resolve(Scope{Channel: "slack"})
	e.Admins()[0] = "trudy"
	if !e.IsAdmin("root") || e.IsAdmin("mallory") || e.IsAdmin("eve") || e.IsAdmin("trudy") {
		t.Errorf("admins changed after New: %q", e.Admins())
	}
	if d := e.Tool("shell", false); d.Allowed {
		t.Errorf("Tool(shell) = %+v after the caller edited its config, want denied", d)
	}
}

// TestConcurrentResolve is for -race: a Resolver is shared by every worker.
func TestConcurrentResolve(t *testing.T) {
	r := New(tree(t, 3, func(l *config.Level, i int) { l.Tools.Deny = []string{fmt.Sprint("t", i)} }))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				e := r.Resolve(fullScope)
				if d := e.Tool("t3", false); d.Allowed {
					t.Errorf("Tool(t3) = %+v, want denied", d)
					return
				}
			}
		})
	}
	wg.Wait()
}

// DMMatters is false only where Access gives every user in every chat the
// same answer for a direct message as for a chat message: then an adapter
// may skip finding out which a message is.
func TestDMMatters(t *testing.T) {
	access := func(a config.Access) Config {
		return Config{Platforms: map[string]PlatformPolicy{"slack": {Level: config.Level{Access: a}}}}
	}
	tests := []struct {
		name string
		pol  Config
		want bool
	}{
		{"unset", Config{}, false},
		{"users only", access(config.Access{Users: []string{"U1"}}), false},
		{"DMs on", access(config.Access{DMs: new(true)}), false},
		{"empty chat list", access(config.Access{Chats: []string{}}), false},
		{"DMs off", access(config.Access{DMs: new(false)}), true},
		{"chat allowlist", access(config.Access{Chats: []string{"C1"}}), true},
		{"users and chats", access(config.Access{Users: []string{"U1"}, Chats: []string{"C1"}}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := New(tt.pol).Resolve(fullScope)
			if got := e.DMMatters(); got != tt.want {
				t.Fatalf("DMMatters() = %t, want %t", got, tt.want)
			}
			differs := false
			for _, u := range []string{"U1", "U2"} {
				for _, c := range []string{"C1", "C2"} {
					if e.Access(u, c, true).Allowed != e.Access(u, c, false).Allowed {
						differs = true
					}
				}
			}
			if !tt.want && differs {
				t.Fatal("DMMatters() is false but Access answers a DM differently")
			}
			if tt.want && !differs {
				t.Fatal("DMMatters() is true but no user or chat tried is answered differently")
			}
		})
	}
}
