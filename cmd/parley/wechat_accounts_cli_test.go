package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels/wechat/wechattest"
)

// TestWeChatLoginForAnAccount: `parley wechat login --account NAME` keeps
// the bot's login in the account's own state, not the default's; status
// lists each account's bots; an account the file does not configure is a
// usage error that names the ones it does.
func TestWeChatLoginForAnAccount(t *testing.T) {
	t.Parallel() // its own fake iLink and home
	ilink := wechattest.NewILink(t)
	ilink.SetLoginSteps("wait", "confirmed")
	home := t.TempDir()
	file := filepath.Join(home, "parley.yaml")
	if err := os.WriteFile(file, []byte("wechat:\n  accounts:\n    family:\n      ilink_base_url: "+ilink.URL()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := mapEnv(map[string]string{"PARLEY_HOME": home})
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"wechat", "login", "--config", file, "--account", "nope"}, strings.NewReader(""), &stdout, &stderr, env); code != 2 || !strings.Contains(stderr.String(), "unknown account (the wechat section configures default, family)") {
		t.Fatalf("unknown account: exit %d: %s", code, stderr.String())
	}
	if ilink.CodesIssued() != 0 {
		t.Fatal("a login for an unknown account asked iLink for a code")
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"wechat", "login", "--config", file, "--account", "family"}, strings.NewReader(""), &stdout, &stderr, env); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "for account family") {
		t.Errorf("login output: %s", stdout.String())
	}
	raw, err := os.ReadFile(filepath.Join(home, "wechat.family.json"))
	if err != nil || !strings.Contains(string(raw), ilink.BotID) {
		t.Fatalf("the account's login file: %v\n%s", err, raw)
	}
	if _, err := os.Stat(filepath.Join(home, "wechat.json")); !os.IsNotExist(err) {
		t.Errorf("the default's login file was written: %v", err)
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"wechat", "status", "--config", file}, nil, &stdout, &stderr, env); code != 0 {
		t.Fatalf("status exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	def, fam, ok := strings.Cut(out, "Account family:")
	if !ok || !strings.Contains(def, "Account default:") || !strings.Contains(def, "no bot is logged in") || !strings.Contains(fam, "bot "+ilink.BotID) ||
		!strings.Contains(fam, "wechat.accounts.family.wecom_bot_id") {
		t.Errorf("status:\n%s", out)
	}
}
