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
// (tools.allow: [] and access.users: [] included); names in the policies
// that match no tool or skill are warned about on stderr, exit 0.
func TestConfigCheckOutputReadsBackTheSame(t *testing.T) {
	file := `policies:
  default:
    tools:
      deny: [shel]
    access:
      users: []
  platforms:
    slack:
      tools:
        allow: []
      skills:
        deny: [no-such-skill]
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
		`policies.default.tools.deny: "shel" matches no tool`,
		`policies.platforms.slack.skills.deny: "no-such-skill" matches no skill`,
	} {
		if !strings.Contains(warnings, "warning: "+want) {
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
// loaded skills; only those matching nothing are named.
func TestPolicyNameWarnings(t *testing.T) {
	file := writeConfig(t, `tools:
  mcp:
    servers:
      gh:
        url: https://mcp.example.com/mcp
skills:
  index: [find-skills-typo]
policies:
  default:
    tools:
      allow: ["*", "web_*", gh__create_issue, "gh*"]
      deny: [gl__delete, load_skil]
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
`)
	cfg, err := config.Load(file, mapEnv(map[string]string{"PARLEY_HOME": t.TempDir(), "PARLEY_WORKSPACE": t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	got := policyNameWarnings(cfg)
	want := []string{
		`policies.default.tools.deny: "gl__delete" matches no tool`,
		`policies.default.tools.deny: "load_skil" matches no tool`,
		`policies.platforms.slack.workspaces.T1.chats.C1.tools.approve: "save_skill_ref" matches no tool`,
		`policies.platforms.slack.workspaces.T1.chats.C1.skills.allow: "nothing-like-this-*" matches no skill`,
		`skills.index: "find-skills-typo" matches no skill`,
	}
	if len(got) != len(want) {
		t.Fatalf("warnings:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("warning %d = %q; want it to start with %q", i, got[i], w)
		}
	}
	if !strings.Contains(got[0], "gh__*") || !strings.Contains(got[0], "load_skill") {
		t.Errorf("the tool warning does not list the known tools: %q", got[0])
	}
}
