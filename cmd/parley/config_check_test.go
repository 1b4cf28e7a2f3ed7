package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestConfigCheckRefusesWhatServeRefuses: every platform and tool setting serve
// cannot start with makes `parley config check` exit non-zero too, naming
// the key or variable to fix and never the secret.
func TestConfigCheckRefusesWhatServeRefuses(t *testing.T) {
	const secret = "s3cret-value-that-must-not-show"
	tests := []struct {
		name string
		file string
		env  map[string]string
		want string
	}{
		{"slack app token without bot token", "", map[string]string{"SLACK_APP_TOKEN": "xapp-" + secret}, "SLACK_BOT_TOKEN"},
		{"slack signing secret without bot token", "", map[string]string{"SLACK_SIGNING_SECRET": secret}, "SLACK_BOT_TOKEN"},
		{"slack bot token without a transport", "", map[string]string{"SLACK_BOT_TOKEN": "xoxb-" + secret}, "SLACK_SIGNING_SECRET"},
		{"slack bot token as the app token", "", map[string]string{"SLACK_BOT_TOKEN": "xoxb-" + secret, "SLACK_APP_TOKEN": "xoxb-" + secret}, "xapp-"},
		{"slack accounts sharing a bot token", "slack:\n  accounts:\n    a: {bot_token: xoxb-" + secret + ", signing_secret: s1}\n    b: {bot_token: xoxb-" + secret + ", signing_secret: s2}\n", nil, "slack.accounts.b.bot_token: the same bot_token as account a"},
		{"slack account named default", "slack:\n  bot_token: xoxb-1\n  signing_secret: s1\n  accounts:\n    default: {bot_token: xoxb-2, signing_secret: " + secret + "}\n", nil, "slack.accounts.default: the section's own keys"},
		{"policy level naming an unknown slack account", "slack:\n  accounts:\n    a: {bot_token: xoxb-1, signing_secret: " + secret + "}\npolicies:\n  platforms:\n    slack:\n      accounts:\n        b: {model: default}\n", nil, "policies.platforms.slack.accounts.b: unknown account"},
		{"feishu app id without secret", "", map[string]string{"FEISHU_APP_ID": "cli_1"}, "FEISHU_APP_SECRET"},
		{"feishu app secret without id", "", map[string]string{"FEISHU_APP_SECRET": secret}, "FEISHU_APP_ID"},
		{"feishu webhook mode without token or key", "", map[string]string{"FEISHU_APP_ID": "cli_1", "FEISHU_APP_SECRET": secret, "FEISHU_MODE": "webhook"}, "feishu.mode"},
		{"feishu unknown mode", "feishu:\n  mode: push\n", nil, "feishu.mode"},
		{"feishu unknown domain", "feishu:\n  domain: example\n", nil, "feishu.domain"},
		{"wecom bot id without secret", "", map[string]string{"WECOM_BOT_ID": "aibot-1"}, "WECOM_BOT_SECRET"},
		{"wecom secret without bot id", "", map[string]string{"WECOM_BOT_SECRET": secret}, "WECOM_BOT_ID"},
		{"wechat chunk size zero", "wechat:\n  chunk_chars: 0\n", nil, "wechat.chunk_chars"},
		{"wecom app without its callback settings", "wecom_app:\n  apps:\n    - {name: ops, corp_id: ww1, agent_id: 1000002, secret: " + secret + "}\n", nil, "wecom_app.apps[0].token"},
		{"wecom app secret variable unset", "wecom_app:\n  apps:\n    - {name: ops, corp_id: ww1, agent_id: 1, secret: \"${WECOM_APP_SECRET}\", token: " + secret + ", encoding_aes_key: " + strings.Repeat("k", 43) + "}\n", nil, "WECOM_APP_SECRET is not set"},
		{"wecom app name unfit for a path", "wecom_app:\n  apps:\n    - {name: Ops/1, corp_id: ww1, agent_id: 1, secret: s, token: t, encoding_aes_key: " + strings.Repeat("k", 43) + "}\n", nil, "wecom_app.apps[0].name"},
		{"official account without its token", "", map[string]string{"WECHAT_OA_APP_ID": "wx1", "WECHAT_OA_APP_SECRET": secret}, "WECHAT_OA_TOKEN"},
		{"official account with a malformed key", "", map[string]string{"WECHAT_OA_APP_ID": "wx1", "WECHAT_OA_APP_SECRET": secret, "WECHAT_OA_TOKEN": "t", "WECHAT_OA_ENCODING_AES_KEY": secret}, "wechat_oa.encoding_aes_key"},
		{"mcp server without a transport", "tools:\n  mcp:\n    servers:\n      gh: {}\n", nil, "tools.mcp.servers.gh: set command"},
		{"mcp header with a broken reference", "tools:\n  mcp:\n    servers:\n      gh:\n        url: https://mcp.example.com/mcp\n        headers: {Authorization: \"Bearer " + secret + "${X\"}\n", nil, "tools.mcp.servers.gh.headers.Authorization"},
		{"web_fetch allowing everything", "tools:\n  web_fetch:\n    allow_private: [0.0.0.0/0]\n", nil, "tools.web_fetch.allow_private"},
		{"web_search provider without its key", "tools:\n  web_search:\n    provider: tavily\n", nil, "WEB_SEARCH_API_KEY"},
		{"web_search key without a provider", "", map[string]string{"WEB_SEARCH_API_KEY": secret}, "WEB_SEARCH_PROVIDER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir(), "PARLEY_LISTEN": "127.0.0.1:0"}
			for k, v := range tt.env {
				env[k] = v
			}
			path := writeConfig(t, tt.file)
			for _, cmd := range [][]string{{"config", "check", "--config", path}, {"serve", "--config", path}} {
				var stdout, stderr bytes.Buffer
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				code := run(ctx, cmd, nil, &stdout, &stderr, mapEnv(env))
				cancel()
				out := stdout.String() + stderr.String()
				if code == 0 || !strings.Contains(out, tt.want) {
					t.Errorf("parley %s: exit %d; want a failure naming %s:\n%s", cmd[0], code, tt.want, out)
				}
				if strings.Contains(out, secret) {
					t.Errorf("parley %s shows the secret:\n%s", cmd[0], out)
				}
			}
		})
	}
}

// TestConfigCheckReportsEveryProblemInLineOrder: one run names every
// problem of the file — values of the wrong type, unknown keys, what
// validation refuses — and the warnings, one a line, in the file's order,
// so that one pass fixes the whole file; the exit code is 1 and nothing
// of the effective config is printed.
func TestConfigCheckReportsEveryProblemInLineOrder(t *testing.T) {
	file := "listen: nope\n" + // 1: validation
		"model:\n" +
		"  timeout: \"10\"\n" + // 3: type
		"  max_tokens: -1\n" + // 4: validation
		"gateway:\n" +
		"  workers: abc\n" + // 6: type
		"log:\n" +
		"  levle: info\n" // 8: unknown key
	env := map[string]string{"OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir()}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"config", "check", "--config", writeConfig(t, file)}, nil, &stdout, &stderr, mapEnv(env))
	if code != 1 || stdout.Len() != 0 {
		t.Fatalf("exit %d, stdout %q; want 1 and nothing printed", code, stdout.String())
	}
	want := []string{
		`line 1: listen: "nope" is not host:port`,
		`line 3: model.timeout: "10" is not a duration`,
		`line 4: model.max_tokens: must be greater than 0`,
		`line 6: gateway.workers: "abc" is not a whole number`,
		`line 8: unknown key "levle" in log`,
		`parley: invalid config: 5 problems`,
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(want), stderr.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d of the report is %q, want it to start %q", i+1, lines[i], w)
		}
	}

	// A warning takes its place among the problems.
	stderr.Reset()
	run(context.Background(), []string{"config", "check", "--config", writeConfig(t, "log:\n  level: info\nmodel:\n  max_tokens: -1\n")}, nil, &stdout, &stderr,
		mapEnv(map[string]string{"OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir(), "PARLEY_LOG_LEVEL": "debug"}))
	got := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(got) != 3 || !strings.HasPrefix(got[0], "warning: line 2: log.level is set in the file and by the environment variable PARLEY_LOG_LEVEL") ||
		!strings.HasPrefix(got[1], "line 4: model.max_tokens") {
		t.Fatalf("want the warning of line 2 before the problem of line 4:\n%s", stderr.String())
	}
}

// TestConfigCheckMasksEveryAccountsSecrets: `parley config check` prints
// the Slack accounts it loaded, each credential as <secret>.
func TestConfigCheckMasksEveryAccountsSecrets(t *testing.T) {
	const secret = "acct-s3cret-that-must-not-show"
	path := writeConfig(t, "slack:\n  accounts:\n    hr:\n      bot_token: xoxb-"+secret+"\n      signing_secret: sign-"+secret+"\n      app_token: xapp-"+secret+"\n")
	var stdout, stderr bytes.Buffer
	env := map[string]string{"OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir()}
	if code := run(context.Background(), []string{"config", "check", "--config", path}, nil, &stdout, &stderr, mapEnv(env)); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	out := stdout.String() + stderr.String()
	if strings.Contains(out, secret) {
		t.Errorf("config check shows an account's secret:\n%s", out)
	}
	if !strings.Contains(out, "    hr:\n") || strings.Count(out, "<secret>") < 3 {
		t.Errorf("config check does not show the hr account masked:\n%s", stdout.String())
	}
}

// TestAccountsRoundTripAndExplain: a file with Slack and Feishu accounts
// and an account's policy level reads back the same from what `parley
// config check` prints, and `parley policy explain --account` names the
// account's level.
func TestAccountsRoundTripAndExplain(t *testing.T) {
	file := `slack:
  bot_token: xoxb-ops
  signing_secret: ops-secret
  accounts:
    hr:
      bot_token: xoxb-hr
      signing_secret: hr-secret
      follow_threads: false
feishu:
  app_id: cli_ops
  app_secret: ops-secret
  accounts:
    hr:
      app_id: cli_hr
      app_secret: hr-secret
      mode: webhook
      encrypt_key: hr-key
policies:
  platforms:
    slack:
      accounts:
        hr:
          tools:
            allow: []
`
	env := mapEnv(map[string]string{"OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir(), "PARLEY_WORKSPACE": t.TempDir()})
	runOK := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, nil, &stdout, &stderr, env); code != 0 {
			t.Fatalf("parley %v: exit %d\n%s", args, code, stderr.String())
		}
		return stdout.String()
	}
	orig := writeConfig(t, file)
	out1 := runOK("config", "check", "--config", orig)
	if out2 := runOK("config", "check", "--config", writeConfig(t, out1)); out1 != out2 {
		t.Errorf("config check of its own output differs:\n--- first\n%s\n--- second\n%s", out1, out2)
	}
	if !strings.Contains(out1, "follow_threads: false") || !strings.Contains(out1, "cli_hr") {
		t.Errorf("config check does not show the accounts:\n%s", out1)
	}
	hr := runOK("policy", "explain", "--config", orig, "--wait", "1s", "--channel", "slack", "--account", "hr")
	if !strings.Contains(hr, "policies.platforms.slack.accounts.hr") {
		t.Errorf("explain --account hr does not name the account's level:\n%s", hr)
	}
	if ops := runOK("policy", "explain", "--config", orig, "--wait", "1s", "--channel", "slack"); strings.Contains(ops, "accounts.hr") {
		t.Errorf("the default app's explain names hr's level:\n%s", ops)
	}
}

// TestConfigCheckListsAccounts: after the effective configuration,
// `parley config check` lists every platform's accounts as comments: how
// each is reached (its routes, its connection), the policy level naming
// it, the profile its messages get with the level that chose it, and
// the triggers that post as it; no credential. (That the listing reads back, as comments, is
// TestAccountsRoundTripAndExplain's.)
func TestConfigCheckListsAccounts(t *testing.T) {
	const secret = "acct-s3cret-that-must-not-show"
	file := `slack:
  bot_token: xoxb-ops-` + secret + `
  signing_secret: ops-` + secret + `
  accounts:
    hr:
      bot_token: xoxb-hr-` + secret + `
      app_token: xapp-hr-` + secret + `
feishu:
  app_id: cli_ops
  app_secret: ops-` + secret + `
  accounts:
    hr:
      app_id: cli_hr
      app_secret: hr-` + secret + `
      mode: webhook
      encrypt_key: hr-` + secret + `
profiles:
  ops: {system_prompt: "You are the on-call assistant."}
  hr: {system_prompt_append: "Be polite.", display_name: HR Helper}
policies:
  platforms:
    slack:
      profile: ops
      accounts:
        hr:
          profile: hr
          tools:
            allow: []
triggers:
  schedules:
    digest:
      cron: "0 9 * * 1-5"
      answer: post
      text: the weekly digest
      to: {platform: slack, workspace: T1, chat: C1}
    reminder:
      cron: "0 9 1 * *"
      answer: post
      text: timesheets are due
      to: {platform: slack, account: hr, workspace: T1, chat: C2}
  webhooks:
    deploys:
      kind: json
      token: deploys-` + secret + `
      text: "{{.service}} deployed"
      to: {platform: feishu, account: hr, workspace: tenant1, chat: oc_1}
`
	env := mapEnv(map[string]string{"OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir(), "PARLEY_WORKSPACE": t.TempDir()})
	check := func(path string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"config", "check", "--config", path}, nil, &stdout, &stderr, env); code != 0 {
			t.Fatalf("exit %d:\n%s", code, stderr.String())
		}
		if out := stdout.String() + stderr.String(); strings.Contains(out, secret) {
			t.Fatalf("config check shows a credential:\n%s", out)
		}
		return stdout.String()
	}
	out := check(writeConfig(t, file))
	_, listing, ok := strings.Cut(out, "# accounts, how each is reached")
	if !ok {
		t.Fatalf("config check lists no accounts:\n%s", out)
	}
	want := []string{
		"#   feishu/default (the section's own keys):\n#     reached by: long connection\n#     policy levels: none\n#     profile: none (the default system prompt)\n#     triggers posting as it: none\n",
		"#   feishu/hr:\n#     reached by: webhooks at /feishu/events/hr\n#     policy levels: none\n#     profile: none (the default system prompt)\n#     triggers posting as it: triggers.webhooks.deploys\n",
		"#   slack/default (the section's own keys):\n#     reached by: webhooks at /slack/events, /slack/commands, /slack/interactions\n#     policy levels: none\n#     profile: ops, chosen at policies.platforms.slack\n#     triggers posting as it: triggers.schedules.digest\n",
		"#   slack/hr:\n#     reached by: Socket Mode\n#     policy levels: policies.platforms.slack.accounts.hr\n#     profile: hr (HR Helper), chosen at policies.platforms.slack.accounts.hr\n#     triggers posting as it: triggers.schedules.reminder\n",
	}
	for _, w := range want {
		if !strings.Contains(listing, w) {
			t.Errorf("the accounts' listing lacks\n%s\nin\n%s", w, listing)
		}
	}
	// A configuration without accounts lists none.
	if out := check(writeConfig(t, "")); strings.Contains(out, "# accounts") {
		t.Errorf("config check without an app lists accounts:\n%s", out)
	}
}
