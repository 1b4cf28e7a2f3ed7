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

func TestWeChatLoginAsksForTheVerificationCodeAndFollowsRedirects(t *testing.T) {
	t.Parallel() // its own fake iLink and home
	ilink := wechattest.NewILink(t)
	ilink.VerifyCode = "2468"
	ilink.SetLoginSteps("wait", "scaned", "need_verifycode", "scaned_but_redirect", "confirmed")
	home := t.TempDir()
	env := mapEnv(map[string]string{"PARLEY_HOME": home, "WECHAT_ILINK_BASE_URL": ilink.URL()})
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"wechat", "login"}, strings.NewReader("2468\n"), &stdout, &stderr, env)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if got := ilink.VerifyCodes(); len(got) != 1 || got[0] != "2468" {
		t.Errorf("verification codes sent: %v", got)
	}
	hosts := ilink.StatusHosts()
	if hosts[len(hosts)-1] != ilink.RedirectHost() {
		t.Errorf("status polls after the redirect went to %v", hosts)
	}
	fi, err := os.Stat(filepath.Join(home, "wechat.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v", fi, err)
	}
	raw, _ := os.ReadFile(filepath.Join(home, "wechat.json"))
	if !strings.Contains(string(raw), ilink.Token()) || !strings.Contains(string(raw), ilink.BotID) {
		t.Errorf("state file lacks the token or bot id:\n%s", raw)
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"wechat", "status"}, nil, &stdout, &stderr, env); code != 0 {
		t.Fatalf("status exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{ilink.BotID, "session:     active", "bot token age", "owner@im.wechat", "cursor:      none yet"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestWeChatLoginFailsAfterExpiredCodes(t *testing.T) {
	ilink := wechattest.NewILink(t)
	ilink.SetLoginSteps("expired")
	var stdout, stderr bytes.Buffer
	env := mapEnv(map[string]string{"PARLEY_HOME": t.TempDir(), "WECHAT_ILINK_BASE_URL": ilink.URL()})
	code := run(context.Background(), []string{"wechat", "login", "--codes", "2"}, strings.NewReader(""), &stdout, &stderr, env)
	if code != 1 || !strings.Contains(stderr.String(), "expired") || ilink.CodesIssued() != 2 {
		t.Fatalf("exit %d, codes %d, stderr %q", code, ilink.CodesIssued(), stderr.String())
	}
}

func TestWeChatUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"wechat"}, nil, &stdout, &stderr, mapEnv(nil)); code != 2 || !strings.Contains(stderr.String(), "parley wechat login") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"wechat", "status"}, nil, &stdout, &stderr, mapEnv(map[string]string{"PARLEY_HOME": t.TempDir()})); code != 0 || !strings.Contains(stdout.String(), "no bot is logged in") {
		t.Fatalf("status without logins: exit %d %q", code, stdout.String())
	}
}
