package config_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/parleyhq/parley/agent/mcp"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/policy"
)

// richConfig sets policy lists at every level, some to [] (which means
// "nothing" for an allow list and "everyone" for access lists) and leaves
// others out (the level above decides), and an MCP server whose allow
// list is set but empty.
const richConfig = `listen: "127.0.0.1:9999"
model:
  timeout: 45s
  max_retries: 0
skills:
  index: [alpha]
tools:
  mcp:
    servers:
      gh:
        url: https://mcp.example.com/mcp
        headers: {Authorization: "Bearer ${GH_TOKEN}"}
        tools:
          allow: []
      files:
        command: npx
        tools:
          deny: [write_file]
policies:
  default:
    tools:
      deny: [shell]
      approve: ["web_*"]
      approve_writes: true
    access:
      users: []
    admins: [slack:U0]
  platforms:
    slack:
      tools:
        allow: []
        write: false
      access:
        dms: false
      limits:
        user_per_minute: 0
      budget:
        tokens_per_user_day: 5000
      approvers:
        users: []
      approval_timeout: 2m
      workspaces:
        T1:
          admins: [U1]
          tools:
            approve: []
          access:
            users: [U1, U2]
          chats:
            C1:
              tools:
                allow: [load_skill, "web_*"]
              access:
                users: []
                chats: []
    feishu:
      skills:
        allow: []
`

// TestPrintedConfigReadsBackTheSame: what config check prints, read back,
// prints the same (a fixed point) and means the same: the same policy
// tree, nil and empty lists apart, and the same decisions for every scope.
func TestPrintedConfigReadsBackTheSame(t *testing.T) {
	getenv := env(map[string]string{"OPENAI_API_KEY": "sk-test-1", "GH_TOKEN": "ghp-1"})
	first, err := config.Load(writeFile(t, richConfig), getenv)
	if err != nil {
		t.Fatal(err)
	}
	printed, err := first.YAML()
	if err != nil {
		t.Fatal(err)
	}
	again, warnings, err := config.LoadWithWarnings(writeFile(t, string(printed)), getenv)
	if err != nil {
		t.Fatalf("the printed config does not load: %v\n%s", err, printed)
	}
	if len(warnings) != 0 {
		t.Errorf("reading the printed config back warns: %q", warnings)
	}
	reprinted, err := again.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if string(reprinted) != string(printed) {
		t.Errorf("print is not a fixed point:\n--- first\n%s\n--- again\n%s", printed, reprinted)
	}
	if !reflect.DeepEqual(policy.FromConfig(first), policy.FromConfig(again)) {
		t.Errorf("policies differ after the round trip:\n%#v\n%#v", policy.FromConfig(first), policy.FromConfig(again))
	}
	for _, tc := range []struct {
		name string
		l    config.Names
		nil_ bool
	}{
		{"default tools.allow (unset)", policy.FromConfig(again).Default.Tools.Allow, true},
		{"default access.users: []", policy.FromConfig(again).Default.Access.Users, false},
		{"slack tools.allow: []", policy.FromConfig(again).Platforms["slack"].Tools.Allow, false},
		{"slack access.users (unset)", policy.FromConfig(again).Platforms["slack"].Access.Users, true},
		{"C1 access.chats: []", policy.FromConfig(again).Platforms["slack"].Workspaces["T1"].Chats["C1"].Access.Chats, false},
		{"gh tools.allow: []", mcp.FromConfig(again).Servers["gh"].Tools.Allow, false},
		{"files tools.allow (unset)", mcp.FromConfig(again).Servers["files"].Tools.Allow, true},
		{"slack approvers.users: []", policy.FromConfig(again).Platforms["slack"].Approvers.Users, false},
		{"T1 tools.approve: []", policy.FromConfig(again).Platforms["slack"].Workspaces["T1"].Tools.Approve, false},
		{"default approvers.users (unset)", policy.FromConfig(again).Default.Approvers.Users, true},
	} {
		if (tc.l == nil) != tc.nil_ || len(tc.l) != 0 {
			t.Errorf("%s = %#v after the round trip; want nil %v and empty", tc.name, tc.l, tc.nil_)
		}
	}
	// The same decisions everywhere: the meaning, not just the tree.
	scopes := []policy.Scope{{Channel: "console"}, {Channel: "slack"}, {Channel: "slack", Workspace: "T1"}, {Channel: "slack", Workspace: "T1", Chat: "C1"},
		{Channel: "slack", Workspace: "T2", Chat: "C9"}, {Channel: "feishu"}, {Channel: "wechat"}}
	for _, s := range scopes {
		a, b := policy.New(*policy.FromConfig(first)).Resolve(s), policy.New(*policy.FromConfig(again)).Resolve(s)
		for _, tool := range []string{"shell", "load_skill", "web_fetch", "gh__x"} {
			for _, writes := range []bool{false, true} {
				if da, db := a.Tool(tool, writes), b.Tool(tool, writes); da != db {
					t.Errorf("%+v tool %s (writes %v): %+v, after the round trip %+v", s, tool, writes, da, db)
				}
				na, da := a.Approval(tool, writes)
				nb, db := b.Approval(tool, writes)
				if na != nb || da != db {
					t.Errorf("%+v approval of %s (writes %v): %v %+v, after the round trip %v %+v", s, tool, writes, na, da, nb, db)
				}
			}
		}
		for _, u := range []string{"U1", "U3"} {
			for _, dm := range []bool{false, true} {
				if da, db := a.Access(u, "C1", dm), b.Access(u, "C1", dm); da != db {
					t.Errorf("%+v access %s (dm %v): %+v, after the round trip %+v", s, u, dm, da, db)
				}
			}
		}
		if da, db := a.Skill("alpha"), b.Skill("alpha"); da != db {
			t.Errorf("%+v skill: %+v, after the round trip %+v", s, da, db)
		}
		if a.MayApprove("U1", "U2") != b.MayApprove("U1", "U2") || a.ApprovalTimeout() != b.ApprovalTimeout() {
			t.Errorf("%+v approvers differ after the round trip", s)
		}
		if a.Limits() != b.Limits() || fmt.Sprint(a.Admins()) != fmt.Sprint(b.Admins()) {
			t.Errorf("%+v limits or admins differ: %+v %v, %+v %v", s, a.Limits(), a.Admins(), b.Limits(), b.Admins())
		}
	}
	// The case that broke: nothing at the default level may deny a tool.
	if d := policy.New(*policy.FromConfig(again)).Resolve(policy.Scope{Channel: "console"}).Tool("load_skill", false); !d.Allowed {
		t.Errorf("load_skill on the console after the round trip: %+v", d)
	}
}

// TestConfigErrorsNameKeyAndLine: type errors, unknown keys and invalid
// values name the key and its line in plain words; a value from a
// variable names the variable instead; a second document is refused.
func TestConfigErrorsNameKeyAndLine(t *testing.T) {
	tests := []struct {
		name, yaml string
		env        map[string]string
		want       []string
		notWant    []string
	}{
		{"duration written as a number", "listen: ':1'\nmodel:\n  timeout: 10\n", nil,
			[]string{`line 3: model.timeout: "10" is not a duration (like 30s or 2m)`}, []string{"unmarshal", "!!int"}},
		{"not a duration", "model:\n  turn_timeout: soon\n", nil, []string{`line 2: model.turn_timeout: "soon" is not a duration`}, nil},
		{"not a whole number", "gateway:\n  workers: many\n", nil, []string{`line 2: gateway.workers: "many" is not a whole number`}, nil},
		{"not a bool", "slack:\n  follow_threads: maybe\n", nil, []string{`line 2: slack.follow_threads: "maybe" is not true or false`}, nil},
		{"a mapping for text", "log:\n  level: {x: 1}\n", nil, []string{"line 2: log.level: a mapping (key: value) where text belongs"}, nil},
		{"a list for a section", "policies:\n  default:\n    tools: [x]\n", nil, []string{"line 3: policies.default.tools: a list where a section of keys belongs"}, nil},
		{"a long value in a flow mapping", "model: {name: x, max_tokens: a great many tokens}\n", nil, []string{`line 1: model.max_tokens: "a great many tokens" is not a whole number`}, nil},
		{"several at once", "model:\n  timeout: 1\ngateway:\n  workers: x\n", nil, []string{"line 2: model.timeout", "line 4: gateway.workers"}, nil},
		{"a secret of the wrong type is not shown", "model:\n  api_key: [sk-live-123]\n", nil, []string{"line 2: model.api_key: a list where text belongs"}, []string{"sk-live-123"}},
		{"unknown key, with a suggestion", "model:\n  timeuot: 5s\n", nil, []string{`line 2: unknown key "timeuot" in model (did you mean "timeout"?)`}, nil},
		{"unknown top-level key", "modle: {}\n", nil, []string{`line 1: unknown key "modle" (did you mean "model"?)`}, nil},
		{"invalid value", "listen: ':1'\ngateway:\n  workers: 0\n", nil, []string{"line 3: gateway.workers: must be greater than 0"}, nil},
		{"invalid list item", "admin:\n  trusted_header: X-User\n  trusted_proxies:\n    - 10.0.0.1\n    - 300.1.1.1\n", nil, []string{"line 5: admin.trusted_proxies[1]"}, nil},
		{"invalid glob deep in the policy tree", "policies:\n  platforms:\n    slack:\n      workspaces:\n        T1:\n          tools:\n            deny: [\"[x\"]\n", nil,
			[]string{`line 7: policies.platforms.slack.workspaces.T1.tools.deny: "[x" is not a valid name or glob`}, nil},
		{"a section's problem", "wechat:\n  chunk_chars: 0\n", nil, []string{"line 2: wechat.chunk_chars"}, nil},
		{"from the environment, not the file", "listen: ':1'\n", map[string]string{"PARLEY_LISTEN": "nowhere"}, []string{`listen: "nowhere" is not host:port (from PARLEY_LISTEN)`}, []string{"line 1"}},
		{"two documents", "listen: ':1'\n---\nmodel: {}\n", nil, []string{"line 2: a second YAML document", "one document"}, nil},
		{"an empty document first", "---\n---\nmodel:\n  name: x\n", nil, []string{"a second YAML document"}, nil},
		{"a trailing separator", "model: {}\n---\n", nil, []string{"line 2: a second YAML document"}, nil},
		{"syntax error", "model:\n  timeout: [1s\n", nil, []string{"line 1: did not find expected"}, []string{"yaml: did"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(writeFile(t, tt.yaml), env(tt.env))
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error has %q:\n%v", w, err)
				}
			}
		})
	}
	// One document after a leading --- is one document.
	if _, err := config.Load(writeFile(t, "---\nmodel:\n  name: x\n"), env(nil)); err != nil {
		t.Errorf("a file starting with ---: %v", err)
	}
}

// TestLoadWarnings: a variable overriding a key the file sets is named
// with the key (no value); a secret that is config check's mask is
// reported as needing the real one, unless a variable supplies it.
func TestLoadWarnings(t *testing.T) {
	tests := []struct {
		name, yaml string
		env        map[string]string
		want       []string // each in one warning, in order
	}{
		{"variable over the file", "listen: '127.0.0.1:1'\nmodel:\n  name: m1\n", map[string]string{"PARLEY_LISTEN": "127.0.0.1:2", "PARLEY_MODEL": "m2"},
			[]string{"line 1: listen is set in the file and by the environment variable PARLEY_LISTEN; the variable wins", "line 3: model.name is set in the file and by the environment variable PARLEY_MODEL"}},
		{"variable alone", "", map[string]string{"PARLEY_LISTEN": "127.0.0.1:2"}, nil},
		{"secret variable over a literal", "model:\n  api_key: sk-file\n", map[string]string{"OPENAI_API_KEY": "sk-env"}, []string{"line 2: model.api_key is set in the file and by the environment variable OPENAI_API_KEY"}},
		{"masked secret read back", "model:\n  api_key: <secret>\n", nil, []string{"line 2: model.api_key: the value is the mask parley config check prints, not a secret; supply the real one (in the file or in OPENAI_API_KEY)"}},
		{"masked secret supplied by its variable", "model:\n  api_key: <secret>\n", map[string]string{"OPENAI_API_KEY": "sk-env"}, nil},
		{"masked header", "tools:\n  mcp:\n    servers:\n      gh:\n        url: https://mcp.example.com/\n        headers: {X-Key: <secret>}\n", nil, []string{"tools.mcp.servers.gh.headers.X-Key: the value is the mask"}},
		{"masked URL password", "redis:\n  url: redis://:xxxxx@redis:6379/0\n", nil, []string{"line 2: redis.url: the value is the mask parley config check prints, not a secret; supply the real one (in the file or in REDIS_URL)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, warnings, err := config.LoadWithWarnings(writeFile(t, tt.yaml), env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != len(tt.want) {
				t.Fatalf("warnings %q; want %d", warnings, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(warnings[i], w) {
					t.Errorf("warning %q lacks %q", warnings[i], w)
				}
				for _, v := range tt.env {
					if strings.Contains(warnings[i], v) {
						t.Errorf("warning %q shows the value %q", warnings[i], v)
					}
				}
			}
		})
	}
}
