package policy

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/config"
)

// profileTree is the tree of the profile tests: the HR persona for a whole
// Slack workspace, the ops persona for its on-call channel, and levels
// that set rules of their own around them.
func profileTree() (Config, *Profiles) {
	tree := Config{
		Platforms: map[string]PlatformPolicy{
			"slack": {
				Level: config.Level{Model: "small", Tools: config.ToolRules{Deny: config.Names{"shell"}}},
				Workspaces: map[string]WorkspacePolicy{
					"T1": {
						Level: config.Level{Profile: "hr"},
						Chats: map[string]config.Level{
							"C_ONCALL": {Profile: "ops"},
							// A chat that chooses ops and still sets its own model.
							"C_LAB": {Profile: "ops", Model: "default"},
						},
					},
					// A workspace whose own skills rule beats the profile it chooses.
					"T2": {Level: config.Level{Profile: "ops", Skills: config.SkillRules{Deny: config.Names{"runbook"}}}},
				},
			},
		},
	}
	profiles := &Profiles{ByName: map[string]Profile{
		"ops": {DisplayName: "Ops assistant", SystemPrompt: "You are the on-call assistant. Be terse.", Model: "big",
			Tools: config.ToolRules{Allow: config.Names{"prometheus__*", "shell"}, Deny: config.Names{}}, Skills: config.SkillRules{Allow: config.Names{"runbook"}}},
		"hr": {SystemPromptAppend: "Be polite. You have no tools.", Tools: config.ToolRules{Allow: config.Names{}}},
	}}
	return tree, profiles
}

func TestTheMostSpecificLevelsProfileWins(t *testing.T) {
	tree, profiles := profileTree()
	r := New(tree).WithProfiles(profiles)
	const ws = "policies.platforms.slack.workspaces.T1"
	for _, tt := range []struct {
		name      string
		scope     Scope
		profile   string
		chosenAt  string
		model     string
		modelFrom string
	}{
		{"the chat's profile beats the workspace's", Scope{Channel: "slack", Workspace: "T1", Chat: "C_ONCALL"}, "ops", ws + ".chats.C_ONCALL", "big", "profiles.ops (chosen at " + ws + ".chats.C_ONCALL)"},
		{"another chat keeps the workspace's", Scope{Channel: "slack", Workspace: "T1", Chat: "C_OTHER"}, "hr", ws, "small", "policies.platforms.slack"},
		{"the chat's own model beats its profile's", Scope{Channel: "slack", Workspace: "T1", Chat: "C_LAB"}, "ops", ws + ".chats.C_LAB", "default", ws + ".chats.C_LAB"},
		{"no level chooses one", Scope{Channel: "slack", Workspace: "T9", Chat: "C1"}, "", "", "small", "policies.platforms.slack"},
		{"another platform", Scope{Channel: "feishu", Workspace: "t1", Chat: "oc_1"}, "", "", "default", LevelBuiltin},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := r.Resolve(tt.scope)
			if p := e.Profile(); p.Name != tt.profile || p.Level != tt.chosenAt {
				t.Errorf("profile = %q chosen at %q, want %q at %q", p.Name, p.Level, tt.profile, tt.chosenAt)
			}
			if d := e.Model(); e.ModelKey() != tt.model || d.Level != tt.modelFrom {
				t.Errorf("model = %q from %q, want %q from %q", e.ModelKey(), d.Level, tt.model, tt.modelFrom)
			}
		})
	}
	if p := r.Resolve(Scope{Channel: "slack", Workspace: "T1", Chat: "C_ONCALL"}).Profile(); p.SystemPrompt != "You are the on-call assistant. Be terse." || p.DisplayName != "Ops assistant" {
		t.Errorf("ops profile = %+v", p)
	}
}

// A profile's rules apply as if written at the level that chose it: they
// beat the levels above it, and lose to that level's own keys.
func TestProfileRulesApplyAtTheLevelThatChoseThem(t *testing.T) {
	tree, profiles := profileTree()
	r := New(tree).WithProfiles(profiles)
	for _, tt := range []struct {
		name    string
		scope   Scope
		tool    string
		allowed bool
		skill   string
		skillOK bool
	}{
		// The platform denies shell; ops, chosen below it, allows it.
		{"ops beats the platform's deny", Scope{Channel: "slack", Workspace: "T1", Chat: "C_ONCALL"}, "shell", true, "runbook", true},
		{"ops allows only its tools", Scope{Channel: "slack", Workspace: "T1", Chat: "C_ONCALL"}, "web_fetch", false, "other", false},
		// hr offers no tools at all.
		{"hr offers no tools", Scope{Channel: "slack", Workspace: "T1", Chat: "C_OTHER"}, "prometheus__query", false, "runbook", true},
		// T2 chooses ops and denies runbook itself: its own rule wins.
		{"the level's own skills rule beats its profile's", Scope{Channel: "slack", Workspace: "T2", Chat: "C1"}, "prometheus__query", true, "runbook", false},
		// Without a profile the platform's deny stands.
		{"no profile", Scope{Channel: "slack", Workspace: "T9", Chat: "C1"}, "shell", false, "runbook", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := r.Resolve(tt.scope)
			if d := e.Tool(tt.tool, false); d.Allowed != tt.allowed {
				t.Errorf("tool %s: %+v, want allowed %t", tt.tool, d, tt.allowed)
			}
			if d := e.Skill(tt.skill); d.Allowed != tt.skillOK {
				t.Errorf("skill %s: %+v, want allowed %t", tt.skill, d, tt.skillOK)
			}
		})
	}
	d := r.Resolve(Scope{Channel: "slack", Workspace: "T1", Chat: "C_ONCALL"}).Tool("shell", false)
	if want := "profiles.ops (chosen at policies.platforms.slack.workspaces.T1.chats.C_ONCALL)"; d.Level != want {
		t.Errorf("shell decided at %q, want %q", d.Level, want)
	}
}

// Explain (and the console's report) names the profile, its display
// name, what it does to the prompt and the level that chose it.
func TestExplainNamesTheProfileAndItsLevel(t *testing.T) {
	tree, profiles := profileTree()
	r := New(tree).WithProfiles(profiles)
	var b bytes.Buffer
	if err := r.Explain(&b, Scope{Channel: "slack", Workspace: "T1", Chat: "C_ONCALL"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"PROFILE\n  ops (Ops assistant)  its own system prompt (40 characters), instead of the default  policies.platforms.slack.workspaces.T1.chats.C_ONCALL\n",
		"profiles.ops (chosen at policies.platforms.slack.workspaces.T1.chats.C_ONCALL) < policies.platforms.slack.workspaces.T1.chats.C_ONCALL",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	rep := r.Report(Scope{Channel: "slack", Workspace: "T1", Chat: "C_OTHER"}, nil, nil)
	last := rep.Sections[len(rep.Sections)-1]
	if last.Title != "PROFILE" || last.Tables[0].Rows[0][0] != "hr" || !strings.Contains(last.Tables[0].Rows[0][1], "29 characters appended") || last.Tables[0].Rows[0][2] != "policies.platforms.slack.workspaces.T1" {
		t.Errorf("report's profile section = %+v", last)
	}
	b.Reset()
	if err := r.Explain(&b, Scope{Channel: "feishu", Workspace: "t1", Chat: "oc_1"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "PROFILE\n  none  the default system prompt  builtin default\n") {
		t.Errorf("explain without a profile:\n%s", b.String())
	}
}

// The resolver keeps its own copy of the profiles.
func TestWithProfilesCopies(t *testing.T) {
	tree, profiles := profileTree()
	r := New(tree).WithProfiles(profiles)
	ops := profiles.ByName["ops"]
	ops.Tools.Allow[0] = "everything"
	profiles.ByName["ops"] = Profile{SystemPrompt: "changed"}
	e := r.Resolve(Scope{Channel: "slack", Workspace: "T1", Chat: "C_ONCALL"})
	if e.Profile().SystemPrompt == "changed" || !e.Tool("prometheus__query", false).Allowed {
		t.Error("a change to the caller's profiles reached the resolver")
	}
}

func TestProfileProblemsNameTheirKeyAndLine(t *testing.T) {
	for _, tt := range []struct {
		name, file string
		want       []string
	}{
		{"a level naming an unknown profile", `
profiles:
  ops:
    system_prompt: Be terse.
policies:
  platforms:
    slack:
      workspaces:
        T1:
          profile: opss
`, []string{`line 10: policies.platforms.slack.workspaces.T1.profile: unknown profile "opss" (want one of ops)`}},
		{"a profile without profiles:", `
policies:
  default:
    profile: ops
`, []string{`line 4: policies.default.profile: unknown profile "ops" (profiles: has none)`}},
		{"both prompts", `
profiles:
  ops:
    system_prompt: Be terse.
    system_prompt_append: And kind.
`, []string{"line 5: profiles.ops.system_prompt_append: set system_prompt (which replaces the default prompt) or system_prompt_append (which adds to it), not both"}},
		{"a bad glob and a bad name", `
profiles:
  ops:
    tools:
      deny: ["[x"]
  "o.ps": {}
`, []string{`line 5: profiles.ops.tools.deny: "[x" is not a valid name or glob`, "profiles.o.ps: a profile's name is letters, digits"}},
		{"an unknown key", `
profiles:
  ops:
    system_promt: Be terse.
`, []string{`line 4: unknown key "system_promt" in profiles.ops`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "parley.yaml")
			if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := config.Load(path, func(string) string { return "" })
			for _, want := range tt.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v\nwant it to contain %q", err, want)
				}
			}
		})
	}
}

// A file without profiles: loads as before: no profile anywhere, and
// nothing printed but an empty section.
func TestConfigWithoutProfilesLoadsUnchanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parley.yaml")
	if err := os.WriteFile(path, []byte("policies:\n  platforms:\n    slack:\n      tools: {deny: [shell]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ProfilesFromConfig(cfg).ByName); n != 0 {
		t.Errorf("%d profiles", n)
	}
	e := New(*FromConfig(cfg)).WithProfiles(ProfilesFromConfig(cfg)).Resolve(Scope{Channel: "slack", Workspace: "T1", Chat: "C1"})
	if p := e.Profile(); p.Name != "" || p.Level != "" || p.SystemPrompt != "" {
		t.Errorf("profile = %+v, want none", p)
	}
	if e.Tool("shell", false).Allowed {
		t.Error("the platform's deny no longer applies")
	}
}
