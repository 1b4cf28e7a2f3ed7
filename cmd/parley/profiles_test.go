package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A profile's mistakes, and a level naming a profile that does not
// exist, stop both `parley config check` and `parley serve`, with the key
// and the line to fix.
func TestConfigCheckAndServeRefuseBadProfiles(t *testing.T) {
	for _, tt := range []struct {
		name, file, want string
	}{
		{"a level naming an unknown profile", "profiles:\n  ops: {system_prompt: Be terse.}\npolicies:\n  platforms:\n    slack:\n      workspaces:\n        T1:\n          chats:\n            C1: {profile: opps}\n",
			`line 9: policies.platforms.slack.workspaces.T1.chats.C1.profile: unknown profile "opps" (want one of ops)`},
		{"a profile naming an unknown model", "profiles:\n  ops:\n    system_prompt: Be terse.\n    model: gpt-9\n",
			`line 4: profiles.ops.model: unknown model "gpt-9" (want default`},
		{"a profile allowing an unknown skill", "profiles:\n  ops:\n    skills:\n      allow: [web-access, runbooks]\n",
			`line 4: profiles.ops.skills.allow: "runbooks" matches no skill known to this configuration`},
		{"a profile denying an unknown tool", "profiles:\n  hr:\n    tools:\n      deny: [save_skill_referenc]\n",
			`line 4: profiles.hr.tools.deny: "save_skill_referenc" matches no tool known to this configuration`},
		{"both prompts", "profiles:\n  hr:\n    system_prompt: Be polite.\n    system_prompt_append: And kind.\n",
			"line 4: profiles.hr.system_prompt_append: set system_prompt"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir(), "PARLEY_WORKSPACE": t.TempDir(), "PARLEY_LISTEN": "127.0.0.1:0"}
			path := writeConfig(t, tt.file)
			for _, cmd := range [][]string{{"config", "check", "--config", path}, {"serve", "--config", path}} {
				var stdout, stderr bytes.Buffer
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				code := run(ctx, cmd, nil, &stdout, &stderr, mapEnv(env))
				cancel()
				if out := stdout.String() + stderr.String(); code == 0 || !strings.Contains(out, tt.want) {
					t.Errorf("parley %s: exit %d; want a failure naming %q:\n%s", cmd[0], code, tt.want, out)
				}
			}
		})
	}
}

// `parley config check` lists the profiles and the levels that choose
// them, as comments, so what it prints still reads back as the same
// configuration.
func TestConfigCheckListsProfilesAndTheirUses(t *testing.T) {
	file := `profiles:
  ops:
    display_name: Ops assistant
    system_prompt: You are the on-call assistant. Be terse.
    skills:
      allow: [web-access]
  hr:
    system_prompt_append: Be polite.
    tools:
      allow: []
  spare:
    system_prompt_append: Unused.
policies:
  platforms:
    slack:
      workspaces:
        T1:
          profile: hr
          chats:
            C_ONCALL: {profile: ops}
    feishu:
      profile: ops
`
	env := mapEnv(map[string]string{"OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir(), "PARLEY_WORKSPACE": t.TempDir()})
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"config", "check", "--config", writeConfig(t, file)}, nil, &stdout, &stderr, env); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	want := "# profiles, and the policy levels that choose them:\n" +
		"#   hr: policies.platforms.slack.workspaces.T1\n" +
		"#   ops (Ops assistant): policies.platforms.feishu, policies.platforms.slack.workspaces.T1.chats.C_ONCALL\n" +
		"#   spare: chosen by no level\n"
	if !strings.HasSuffix(stdout.String(), want) {
		t.Errorf("config check ends\n%s\nwant it to end\n%s", tail(stdout.String(), 400), want)
	}
	// What it printed is a configuration that checks the same.
	again := filepath.Join(t.TempDir(), "again.yaml")
	if err := os.WriteFile(again, stdout.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var out2 bytes.Buffer
	if code := run(context.Background(), []string{"config", "check", "--config", again}, nil, &out2, &stderr, env); code != 0 || out2.String() != stdout.String() {
		t.Errorf("the printed configuration checks as exit %d:\n%s\n%s", code, out2.String(), stderr.String())
	}
}

// A configuration without profiles prints what it printed before: no
// listing, an empty profiles: section.
func TestConfigCheckWithoutProfilesListsNone(t *testing.T) {
	env := mapEnv(map[string]string{"OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir(), "PARLEY_WORKSPACE": t.TempDir()})
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"config", "check", "--config", writeConfig(t, "policies:\n  default: {tools: {write: false}}\n")}, nil, &stdout, &stderr, env); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	if strings.Contains(stdout.String(), "# profiles") || !strings.Contains(stdout.String(), "\nprofiles: {}\n") {
		t.Errorf("config check without profiles printed:\n%s", stdout.String())
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// `parley policy explain` resolves with the configured profiles: it names
// the chat's profile and the level that chose it, and the decisions the
// profile made.
func TestPolicyExplainNamesTheProfile(t *testing.T) {
	file := "profiles:\n  ops:\n    display_name: Ops assistant\n    system_prompt: Be terse.\n    tools:\n      deny: [save_skill_reference]\n" +
		"policies:\n  platforms:\n    slack:\n      workspaces:\n        T1:\n          chats:\n            C_ONCALL: {profile: ops}\n"
	env := mapEnv(map[string]string{"OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir(), "PARLEY_WORKSPACE": t.TempDir()})
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"policy", "explain", "--config", writeConfig(t, file), "--wait", "1s", "--channel", "slack", "--workspace", "T1", "--chat", "C_ONCALL"}, nil, &stdout, &stderr, env)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	const level = "policies.platforms.slack.workspaces.T1.chats.C_ONCALL"
	for _, want := range []string{
		"PROFILE\n  ops (Ops assistant)  its own system prompt (9 characters), instead of the default  " + level + "\n",
		`tools.deny "save_skill_reference"  profiles.ops (chosen at ` + level + ")",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("policy explain lacks %q:\n%s", want, stdout.String())
		}
	}
}
