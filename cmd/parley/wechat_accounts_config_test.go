package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestWeChatAccountsConfigCheck: `parley config check` refuses, each on
// the line of its key, two WeChat accounts that are one WeCom bot, two
// that are one Official Account, a name that cannot be an account's, and
// a policy level naming an account the section does not configure; it
// never shows an account's secret.
func TestWeChatAccountsConfigCheck(t *testing.T) {
	const secret = "wx-acct-s3cret-that-must-not-show"
	file := `wechat:
  wecom_bot_id: aib_ops
  wecom_bot_secret: ops-` + secret + `
  accounts:
    hr:
      wecom_bot_id: aib_ops
      wecom_bot_secret: hr-` + secret + `
    HR: {}
wechat_oa:
  app_id: wx1
  app_secret: s1-` + secret + `
  token: t1-` + secret + `
  accounts:
    shop:
      app_id: wx1
      app_secret: s2-` + secret + `
      token: t2-` + secret + `
policies:
  platforms:
    wechat_oa:
      accounts:
        nope: {model: default}
`
	var stdout, stderr bytes.Buffer
	env := mapEnv(map[string]string{"OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir()})
	if code := run(context.Background(), []string{"config", "check", "--config", writeConfig(t, file)}, nil, &stdout, &stderr, env); code != 1 {
		t.Fatalf("exit %d:\n%s%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String() + stderr.String()
	for _, want := range []string{
		"line 6: wechat.accounts.hr.wecom_bot_id: the same wecom_bot_id as account default",
		"line 8: wechat.accounts.HR: an account's name is part of its routes",
		"line 15: wechat_oa.accounts.shop.app_id: the same app_id as account default",
		"line 22: policies.platforms.wechat_oa.accounts.nope: unknown account (the wechat_oa section configures default, shop)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config check lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, secret) {
		t.Errorf("config check shows a secret:\n%s", out)
	}
}

// TestWeChatAccountsCheckAndExplain: a valid file with WeChat and Official
// Account accounts prints every account's secrets masked, reads back the
// same from what config check prints, and `parley policy explain
// --account` names a WeChat account's level.
func TestWeChatAccountsCheckAndExplain(t *testing.T) {
	const secret = "wx-ok-s3cret-that-must-not-show"
	file := `wechat:
  wecom_bot_id: aib_ops
  wecom_bot_secret: ops-` + secret + `
  accounts:
    hr:
      wecom_bot_id: aib_hr
      wecom_bot_secret: hr-` + secret + `
      chunk_chars: 300
    family: {}
wechat_oa:
  accounts:
    shop:
      app_id: wx2
      app_secret: s2-` + secret + `
      token: t2-` + secret + `
policies:
  platforms:
    wechat:
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
	out := runOK("config", "check", "--config", orig)
	if strings.Contains(out, secret) {
		t.Errorf("config check shows a secret:\n%s", out)
	}
	if !strings.Contains(out, "aib_hr") || !strings.Contains(out, "chunk_chars: 300") || !strings.Contains(out, "family:") || strings.Count(out, "<secret>") < 4 {
		t.Errorf("config check does not show the accounts, masked:\n%s", out)
	}
	if again := runOK("config", "check", "--config", writeConfig(t, out)); again != out {
		t.Errorf("config check of its own output differs:\n--- first\n%s\n--- second\n%s", out, again)
	}
	hr := runOK("policy", "explain", "--config", orig, "--wait", "1s", "--channel", "wechat", "--account", "hr")
	if !strings.Contains(hr, "policies.platforms.wechat.accounts.hr") {
		t.Errorf("explain --account hr does not name the account's level:\n%s", hr)
	}
	if ops := runOK("policy", "explain", "--config", orig, "--wait", "1s", "--channel", "wechat"); strings.Contains(ops, "accounts.hr") {
		t.Errorf("the default account's explain names hr's level:\n%s", ops)
	}
}
