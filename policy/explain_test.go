package policy

import (
	"bytes"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/config"
)

var skillTools = []ToolInfo{
	{Name: "save_skill_reference", Writes: true},
	{Name: "load_skill"},
	{Name: "find_skills"},
}

func explain(t *testing.T, pol Config, s Scope, tools []ToolInfo, skills []string) string {
	t.Helper()
	var b bytes.Buffer
	if err := New(pol).Explain(&b, s, tools, skills); err != nil {
		t.Fatalf("Explain: %v", err)
	}
	return b.String()
}

// line returns the first line of out that starts (after indentation) with
// prefix followed by a space, failing the test if there is none.
func line(t *testing.T, out, prefix string) string {
	t.Helper()
	for l := range strings.Lines(out) {
		if strings.HasPrefix(strings.TrimSpace(l), prefix+" ") {
			return l
		}
	}
	t.Fatalf("no line starting with %q in:\n%s", prefix, out)
	return ""
}

func wantAll(t *testing.T, text string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(text, s) {
			t.Errorf("missing %q in:\n%s", s, text)
		}
	}
}

func TestExplainWechatDefault(t *testing.T) {
	out := explain(t, Config{}, Scope{Channel: "wechat", Workspace: "acct", Chat: "u1"}, skillTools, []string{"pdf"})

	wantAll(t, line(t, out, "Policy"), `channel "wechat"`, `workspace "acct"`, `chat "u1"`)
	wantAll(t, line(t, out, "Levels"), "builtin default < policies.default < builtin wechat default")
	if strings.Contains(line(t, out, "Levels"), "policies.platforms.wechat") {
		t.Errorf("levels line names a level the config lacks:\n%s", out)
	}
	wantAll(t, line(t, out, "Not"), "policies.platforms.wechat, policies.platforms.wechat.workspaces.acct, policies.platforms.wechat.workspaces.acct.chats.u1")

	wantAll(t, line(t, out, "TOOLS"), "write: false (builtin wechat default)")
	wantAll(t, line(t, out, "save_skill_reference"), "write", "DENIED", "tools.write: false", "builtin wechat default")
	for _, tool := range []string{"load_skill", "find_skills"} {
		wantAll(t, line(t, out, tool), "read", "allowed", "default: allowed")
	}
	wantAll(t, line(t, out, "pdf"), "allowed", "default: allowed", "builtin default")
	wantAll(t, line(t, out, "users"), "default: everyone", "builtin default")
	wantAll(t, line(t, out, "chats"), "default: every chat")
	wantAll(t, line(t, out, "dms"), "default: on")
	wantAll(t, out, "ADMINS\n  none")

	for _, tool := range []string{"load_skill", "save_skill_reference"} {
		wantAll(t, line(t, out, tool), " builtin ")
	}

	// Rows are sorted by name and their columns aligned.
	find, load, save := strings.Index(out, "  find_skills"), strings.Index(out, "  load_skill"), strings.Index(out, "  save_skill_reference")
	if !(find < load && load < save) {
		t.Errorf("tools not sorted by name:\n%s", out)
	}
	col := func(l string) int { return strings.Index(l, "allowed") + strings.Index(l, "DENIED") + 1 }
	if a, b := col(line(t, out, "load_skill")), col(line(t, out, "save_skill_reference")); a != b {
		t.Errorf("decision column not aligned (%d vs %d):\n%s", a, b, out)
	}
}

func TestExplainOperatorLevels(t *testing.T) {
	pol := Config{
		Default: config.Level{Admins: []string{"wechat:root", "slack:U1"}, Skills: config.SkillRules{Deny: []string{"danger-*"}}},
		Platforms: map[string]PlatformPolicy{
			"wechat": {
				Level: config.Level{
					Tools:  config.ToolRules{Write: new(false)},
					Access: config.Access{Users: []string{"wx1", "wx2"}, DMs: new(true)},
				},
				Workspaces: map[string]WorkspacePolicy{
					"acct": {Chats: map[string]config.Level{
						"vip": {Tools: config.ToolRules{Write: new(true), Deny: []string{"find_*"}}, Admins: []string{"wx1"}},
					}},
				},
			},
		},
	}
	const chat = "policies.platforms.wechat.workspaces.acct.chats.vip"

	t.Run("platform sets write false", func(t *testing.T) {
		out := explain(t, pol, Scope{Channel: "wechat", Workspace: "acct", Chat: "other"}, skillTools, []string{"danger-zone"})
		wantAll(t, line(t, out, "save_skill_reference"), "DENIED", "tools.write: false", "policies.platforms.wechat")
		if strings.Contains(line(t, out, "save_skill_reference"), "builtin wechat default") {
			t.Errorf("operator's level should decide, not the builtin one:\n%s", out)
		}
		wantAll(t, line(t, out, "danger-zone"), "DENIED", `skills.deny "danger-*"`, "policies.default")
		wantAll(t, line(t, out, "users"), "wx1, wx2", "policies.platforms.wechat")
		wantAll(t, line(t, out, "dms"), "on", "policies.platforms.wechat")
		wantAll(t, out, "ADMINS\n  wechat:root, slack:U1  policies.default", "GLOBAL ADMINS (skills on, off, trust, reload)\n  root  policies.default")
		wantAll(t, line(t, out, "Not"), "policies.platforms.wechat.workspaces.acct.chats.other")
	})
	t.Run("chat re-enables writes", func(t *testing.T) {
		out := explain(t, pol, Scope{Channel: "wechat", Workspace: "acct", Chat: "vip"}, skillTools, nil)
		wantAll(t, line(t, out, "Levels"), "policies.platforms.wechat < policies.platforms.wechat.workspaces.acct < "+chat)
		if strings.Contains(out, "Not in config") {
			t.Errorf("every level exists, yet some reported missing:\n%s", out)
		}
		wantAll(t, line(t, out, "save_skill_reference"), "allowed", "tools.write: true", chat)
		wantAll(t, line(t, out, "find_skills"), "DENIED", `tools.deny "find_*"`, chat)
		wantAll(t, out, "(no skills given)", "ADMINS\n  wx1  "+chat, "GLOBAL ADMINS (skills on, off, trust, reload)\n  root  policies.default")
	})
}

func TestExplainUnknownPlatform(t *testing.T) {
	out := explain(t, Config{}, Scope{Channel: "irc"}, skillTools, nil)
	wantAll(t, out, `Channel "irc" is not a known platform`, "builtin default < policies.default\n")
	wantAll(t, line(t, out, "save_skill_reference"), "allowed")
}

func TestExplainDoesNotModifyInputs(t *testing.T) {
	tools := slices.Clone(skillTools)
	skills := []string{"b", "a"}
	explain(t, Config{}, Scope{Channel: "slack"}, tools, skills)
	if !slices.Equal(tools, skillTools) || !slices.Equal(skills, []string{"b", "a"}) {
		t.Errorf("Explain reordered its inputs: %v %v", tools, skills)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

func TestExplainWriteError(t *testing.T) {
	boom := errors.New("disk full")
	err := New(Config{}).Explain(failWriter{boom}, Scope{Channel: "slack"}, skillTools, nil)
	if !errors.Is(err, boom) {
		t.Errorf("Explain error = %v, want one wrapping %v", err, boom)
	}
}

// An MCP tool is decided like a builtin one, by its class, and shown with
// its source; a server's class placeholder (SERVER__* as read and as
// write) is decided by the same rules.
func TestExplainMCPTools(t *testing.T) {
	tools := append([]ToolInfo{
		{Name: "github__create_issue", Writes: true, Source: "mcp:github"},
		{Name: "github__get_issue", Source: "mcp:github"},
		{Name: "files__*", Writes: true, Source: "mcp:files"},
		{Name: "files__*", Source: "mcp:files"},
	}, skillTools...)
	out := explain(t, Config{}, Scope{Channel: "wechat"}, tools, nil)
	wantAll(t, line(t, out, "github__create_issue"), "mcp:github", "write", "DENIED", "tools.write: false", "builtin wechat default")
	wantAll(t, line(t, out, "github__get_issue"), "mcp:github", "read", "allowed", "default: allowed")
	read := regexp.MustCompile(`files__\* +mcp:files +read +allowed`).FindStringIndex(out)
	write := regexp.MustCompile(`files__\* +mcp:files +write +DENIED`).FindStringIndex(out)
	if read == nil || write == nil || write[0] < read[0] {
		t.Errorf("placeholder rows missing or not read first:\n%s", out)
	}
	pol := Config{Default: config.Level{Tools: config.ToolRules{Deny: []string{"github__*"}}}}
	out = explain(t, pol, Scope{Channel: "slack"}, tools, nil)
	wantAll(t, line(t, out, "github__get_issue"), "DENIED", `tools.deny "github__*"`, "policies.default")
}
