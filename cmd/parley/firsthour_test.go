package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/internal/redistest"
)

// TestHealthcheckReadsListenFromTheConfig: without --addr, the health check
// probes the address serve listens on, which a config file's listen: sets
// (named by --config or PARLEY_CONFIG); PARLEY_LISTEN still overrides it,
// as it does for serve.
func TestHealthcheckReadsListenFromTheConfig(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer up.Close()
	addr := strings.TrimPrefix(up.URL, "http://")
	closed := freeAddr(t)
	atUp := writeConfig(t, "listen: "+addr+"\n")
	atClosed := writeConfig(t, "listen: "+closed+"\n")
	tests := []struct {
		name string
		args []string
		env  map[string]string
		ok   bool
	}{
		{"--config", []string{"--config", atUp}, nil, true},
		{"PARLEY_CONFIG", nil, map[string]string{"PARLEY_CONFIG": atUp}, true},
		{"config names a closed port", []string{"--config", atClosed}, nil, false},
		{"PARLEY_LISTEN overrides the file, as for serve", []string{"--config", atClosed}, map[string]string{"PARLEY_LISTEN": addr}, true},
		{"--addr wins", []string{"--config", atClosed, "--addr", addr}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"healthcheck"}, tt.args...), nil, &stdout, &stderr, mapEnv(tt.env))
			if (code == 0) != tt.ok {
				t.Fatalf("exit %d, want success %v; stderr %q", code, tt.ok, stderr.String())
			}
		})
	}
	var stderr bytes.Buffer
	bad := writeConfig(t, "listen: nowhere\n")
	if code := run(context.Background(), []string{"healthcheck", "--config", bad}, nil, io.Discard, &stderr, mapEnv(nil)); code == 0 || !strings.Contains(stderr.String(), "listen") {
		t.Fatalf("a config with a bad listen: exit %d, %q; want a failure naming listen", code, stderr.String())
	}
}

// TestPolicyExplainRefusesAnUnknownPlatform: a misspelt --channel is an
// error listing the platforms, not the explanation of a channel that
// cannot exist.
func TestPolicyExplainRefusesAnUnknownPlatform(t *testing.T) {
	var stdout, stderr bytes.Buffer
	env := mapEnv(map[string]string{"PARLEY_HOME": t.TempDir()})
	code := run(context.Background(), []string{"policy", "explain", "--channel", "slak", "--wait", "1s"}, nil, &stdout, &stderr, env)
	if code == 0 || stdout.Len() != 0 {
		t.Fatalf("exit %d, stdout %q; want a failure and no explanation", code, stdout.String())
	}
	for _, want := range []string{`"slak"`, "slack", "feishu", "wechat"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %s: %q", want, stderr.String())
		}
	}
	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), []string{"policy", "explain", "--channel", "slack", "--wait", "1s"}, nil, &stdout, &stderr, env); code != 0 || !strings.Contains(stdout.String(), "TOOLS") {
		t.Fatalf("a real platform: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
}

const noChannelWarning = "no channel is configured"

// TestServeWarnsWithoutAChannel: a server no platform can reach says so once;
// one with a channel does not.
func TestServeWarnsWithoutAChannel(t *testing.T) {
	model := openaitest.New(t)
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var stderr syncBuffer
	getenv := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_LISTEN": addr, "PARLEY_HOME": t.TempDir()})
	go func() { done <- run(ctx, []string{"serve"}, nil, io.Discard, &stderr, getenv) }()
	waitFor(t, "http://"+addr+"/healthz", &stderr)
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	if n := strings.Count(stderr.String(), noChannelWarning); n != 1 || !strings.Contains(stderr.String(), "level=WARN") {
		t.Fatalf("the warning appears %d times; want one WARN line:\n%s", n, stderr.String())
	}

	srv := startSlackServe(t, redistest.New(t), openaitest.New(t), slacktest.New(t))
	if strings.Contains(srv.stderr.String(), noChannelWarning) {
		t.Fatalf("serve with Slack configured warns of no channel:\n%s", srv.stderr.String())
	}
}

// TestConfigCheckOutputReadsBackTheSame: the output of config check, fed
// back as the config, prints the same and explains the same policies
// (tools.allow: [] and access.users: [] included); names in the allow
// lists that match no tool or skill are warned about on stderr, exit 0.
func TestConfigCheckOutputReadsBackTheSame(t *testing.T) {
	file := `policies:
  default:
    tools:
      allow: ["*", shel]
    access:
      users: []
  platforms:
    slack:
      tools:
        allow: []
      skills:
        allow: [no-such-skill]
      workspaces:
        T1:
          tools:
            allow: ["web_*", load_skill]
`
	env := mapEnv(map[string]string{"OPENAI_API_KEY": "sk-test-secret", "PARLEY_HOME": t.TempDir(), "PARLEY_WORKSPACE": t.TempDir()})
	check := func(path string) (string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"config", "check", "--config", path}, nil, &stdout, &stderr, env); code != 0 {
			t.Fatalf("config check %s: exit %d\n%s", path, code, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	explain := func(path string, scope ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args := append([]string{"policy", "explain", "--config", path, "--wait", "1s"}, scope...)
		if code := run(context.Background(), args, nil, &stdout, &stderr, env); code != 0 {
			t.Fatalf("policy explain %v: exit %d\n%s", scope, code, stderr.String())
		}
		return stdout.String()
	}
	orig := writeConfig(t, file)
	out1, warnings := check(orig)
	for _, want := range []string{
		`warning: line 4: policies.default.tools.allow: "shel" matches no tool`,
		`warning: line 12: policies.platforms.slack.skills.allow: "no-such-skill" matches no skill`,
	} {
		if !strings.Contains(warnings, want) {
			t.Errorf("stderr lacks %q:\n%s", want, warnings)
		}
	}
	if strings.Contains(warnings, `"web_*"`) || strings.Contains(warnings, `"load_skill"`) {
		t.Errorf("a known tool is warned about:\n%s", warnings)
	}
	if strings.Contains(out1+warnings, "sk-test-secret") {
		t.Fatal("config check shows the secret")
	}
	printed := writeConfig(t, out1)
	out2, _ := check(printed)
	if out1 != out2 {
		t.Errorf("config check of its own output differs:\n--- first\n%s\n--- second\n%s", out1, out2)
	}
	for _, scope := range [][]string{{"--channel", "console"}, {"--channel", "slack"}, {"--channel", "slack", "--workspace", "T1"}, {"--channel", "feishu"}} {
		if a, b := explain(orig, scope...), explain(printed, scope...); a != b {
			t.Errorf("policy explain %v differs after the round trip:\n--- file\n%s\n--- printed\n%s", scope, a, b)
		}
	}
	if e := explain(printed, "--channel", "console"); !strings.Contains(e, "load_skill") || strings.Contains(e, "not in tools.allow") {
		t.Errorf("the printed config denies tools on the console:\n%s", e)
	}
}

// TestPolicyNameWarnings: names and globs are checked against the skill
// and web tools, any tool under a configured MCP server's prefix, and the
// loaded skills; only those matching nothing are named, those of a deny
// or approve list as problems, the others as warnings, each with its line.
func TestPolicyNameWarnings(t *testing.T) {
	path := writeConfig(t, `tools:
  mcp:
    servers:
      gh:
        url: https://mcp.example.com/mcp
skills:
  index: [find-skills-typo]
policies:
  default:
    tools:
      allow: ["*", "web_*", gh__create_issue, "gh*", gl__list]
      deny: [gh__delete_repo, "gh__*", gl__delete, load_skil]
  platforms:
    slack:
      workspaces:
        T1:
          chats:
            C1:
              tools:
                approve: [save_skill_ref]
              skills:
                allow: ["*", "nothing-like-this-*"]
                deny: [no-such-skill]
`)
	getenv := mapEnv(map[string]string{"PARLEY_HOME": t.TempDir(), "PARLEY_WORKSPACE": t.TempDir()})
	cfg, err := config.Load(path, getenv)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := config.ReadLines(path, getenv)
	if err != nil {
		t.Fatal(err)
	}
	problems, warnings := policyNameProblems(cfg, lines)
	for _, tt := range []struct {
		what     string
		got      []string
		want     []string
		wantList string // a tool or skill the first message lists as known
	}{
		{"problems", problems, []string{
			`line 12: policies.default.tools.deny: "gl__delete" matches no tool`,
			`line 12: policies.default.tools.deny: "load_skil" matches no tool`,
			`line 20: policies.platforms.slack.workspaces.T1.chats.C1.tools.approve: "save_skill_ref" matches no tool`,
			`line 23: policies.platforms.slack.workspaces.T1.chats.C1.skills.deny: "no-such-skill" matches no skill`,
		}, "gh__*"},
		{"warnings", warnings, []string{
			`line 11: policies.default.tools.allow: "gl__list" matches no tool`,
			`line 22: policies.platforms.slack.workspaces.T1.chats.C1.skills.allow: "nothing-like-this-*" matches no skill`,
			`line 7: skills.index: "find-skills-typo" matches no skill`,
		}, "load_skill"},
	} {
		if len(tt.got) != len(tt.want) {
			t.Errorf("%s:\n%s\nwant %d", tt.what, strings.Join(tt.got, "\n"), len(tt.want))
			continue
		}
		for i, w := range tt.want {
			if !strings.HasPrefix(tt.got[i], w) {
				t.Errorf("%s %d = %q; want it to start with %q", tt.what, i, tt.got[i], w)
			}
		}
		if !strings.Contains(tt.got[0], tt.wantList) {
			t.Errorf("%s: the message does not list the known names: %q", tt.what, tt.got[0])
		}
	}
}

// TestAnUnknownNameInDenyIsAnError: a typo in tools.deny denies nothing,
// so config check refuses the file, listing the name with its key and line
// among the other problems in line order, and serve refuses to start with
// the same words; a name under a configured MCP server's prefix is not
// refused (its tools are known only once it answers), nor is a typo in an
// allow list (a warning: it allows nothing).
func TestAnUnknownNameInDenyIsAnError(t *testing.T) {
	env := mapEnv(map[string]string{"OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir(), "PARLEY_WORKSPACE": t.TempDir()})
	path := writeConfig(t, `tools:
  mcp:
    servers:
      gh:
        url: https://mcp.example.com/mcp
policies:
  default:
    tools:
      allow: [web_fetch, web_serch]
      deny: [gh__delete_repo, shel]
      approve: ["gh__*"]
model:
  timeout: soon
`)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"config", "check", "--config", path}, nil, &stdout, &stderr, env)
	if code == 0 {
		t.Fatalf("config check accepted a deny list naming no tool:\n%s", stderr.String())
	}
	got := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	want := []string{
		`warning: line 9: policies.default.tools.allow: "web_serch" matches no tool`,
		`line 10: policies.default.tools.deny: "shel" matches no tool`,
		`line 13: model.timeout: `,
	}
	if len(got) < len(want) {
		t.Fatalf("stderr:\n%s\nwant the lines starting\n%s", stderr.String(), strings.Join(want, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("line %d of stderr = %q; want it to start with %q", i, got[i], w)
		}
	}
	if strings.Contains(stderr.String(), "gh__") && !strings.Contains(stderr.String(), "gh__*)") {
		t.Errorf("a name under the MCP server's prefix is refused:\n%s", stderr.String())
	}

	path = writeConfig(t, `policies:
  default:
    tools:
      deny: [shel]
`)
	stderr.Reset()
	if code := run(context.Background(), []string{"config", "check", "--config", path}, nil, &stdout, &stderr, env); code == 0 {
		t.Fatalf("config check accepted tools.deny: [shel]:\n%s", stderr.String())
	}
	checked := strings.TrimSpace(stderr.String())
	stderr.Reset()
	if code := run(context.Background(), []string{"serve", "--config", path}, nil, &stdout, &stderr, env); code == 0 {
		t.Fatal("serve started with tools.deny: [shel]")
	}
	const msg = `line 4: policies.default.tools.deny: "shel" matches no tool`
	if !strings.HasPrefix(checked, msg) || !strings.Contains(stderr.String(), msg) {
		t.Errorf("config check and serve do not refuse with the same words:\n--- check\n%s\n--- serve\n%s", checked, stderr.String())
	}
}
