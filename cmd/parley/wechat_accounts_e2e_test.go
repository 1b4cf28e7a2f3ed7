package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/sessions"
)

// TestTwoWeComBotsThroughServe: one `parley serve` runs two WeCom AI bots
// (the section's own and wechat.accounts.hr) on one WeCom address, and a
// third account whose secret WeCom refuses. Each bot answers only its own
// message, in its own conversation, the hr one under its account's
// policy (no tools); the refused account is named in /readyz (degraded,
// still ready for the others) and parley_account_up, and its secret
// reaches no log.
func TestTwoWeComBotsThroughServe(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	r := redistest.New(t)
	model := openaitest.New(t)
	ops := wechattest.NewWeCom(t, "aib_ops", "ops-secret")
	hr := wechattest.NewWeCom(t, "aib_hr", "hr-secret")
	gone := wechattest.NewWeCom(t, "aib_gone", "rotated-secret")
	host := wechattest.NewWeComHost(t, ops, hr, gone)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  prefix: %q
wechat:
  wecom_bot_id: aib_ops
  wecom_bot_secret: ops-secret
  wecom_ws_url: %s
  retry: {base: 50ms, max: 500ms}
  accounts:
    hr:
      wecom_bot_id: aib_hr
      wecom_bot_secret: hr-secret
    gone:
      wecom_bot_id: aib_gone
      wecom_bot_secret: revoked-secret
policies:
  platforms:
    wechat:
      accounts:
        hr:
          tools: {allow: []}
`, r.Prefix, host.URL()))
	env := map[string]string{"PARLEY_CONFIG": cfg, "REDIS_URL": r.URL, "OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir()}
	s := startWeChatServe(t, env)
	wechatEventually(t, "both subscriptions and the refused account in /readyz", func() bool {
		resp, err := http.Get(s.base + "/readyz")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return ops.Connected() && hr.Connected() && resp.StatusCode == http.StatusOK &&
			strings.Contains(string(body), "degraded: wechat/gone: ") && strings.Contains(string(body), "refused")
	}, s.stderr)
	wechatEventually(t, "parley_account_up of each account", func() bool {
		return metricLine(s.base, `parley_account_up{account="gone",channel="wechat"} 0`) &&
			metricLine(s.base, `parley_account_up{account="hr",channel="wechat"} 1`) &&
			metricLine(s.base, `parley_account_up{account="default",channel="wechat"} 1`)
	}, s.stderr)

	for _, send := range []struct {
		bot  *wechattest.WeCom
		text string
	}{{ops, "deploy status"}, {hr, "holiday policy"}} {
		if err := send.bot.SendCallback(wechattest.Callback{ReqID: "req-" + send.bot.BotID, MsgID: "m1", User: "alice", Text: send.text}); err != nil {
			t.Fatal(err)
		}
	}
	wechatEventually(t, "both answers", func() bool {
		_, a := wechatFinishedFrames(ops, "req-aib_ops")
		_, b := wechatFinishedFrames(hr, "req-aib_hr")
		return a == 1 && b == 1
	}, s.stderr)
	for bot, want := range map[*wechattest.WeCom]string{ops: "echo: deploy status", hr: "echo: holiday policy"} {
		frames, _ := wechatFinishedFrames(bot, "req-"+bot.BotID)
		if last := frames[len(frames)-1].Stream(); last.Content != want {
			t.Errorf("%s answered %q, want %q", bot.BotID, last.Content, want)
		}
	}
	if n := len(gone.Frames("aibot_respond_msg")) + len(ops.Frames("aibot_send_msg")) + len(hr.Frames("aibot_send_msg")); n != 0 {
		t.Errorf("%d frames besides the two answers", n)
	}
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix})
	for key, want := range map[string]string{"wechat:aib_ops:alice:": "deploy status", "wechat/hr:aib_hr:alice:": "holiday policy"} {
		h, err := store.History(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) == 0 || h[0].Content != want {
			t.Errorf("history %s = %+v, want it to start with %q", key, h, want)
		}
	}
	// The hr account's level takes every tool away; the default's keeps them.
	tools := map[string]int{}
	for _, req := range model.Requests() {
		for _, m := range req.Messages {
			for _, text := range []string{"deploy status", "holiday policy"} {
				if strings.Contains(fmt.Sprint(m.Content), text) {
					tools[text] = len(req.Tools)
				}
			}
		}
	}
	if tools["deploy status"] == 0 || tools["holiday policy"] != 0 {
		t.Errorf("tools offered per question: %v; want some to ops, none to hr", tools)
	}
	if !metricLine(s.base, `parley_account_messages_received_total{account="hr",channel="wechat"} 1`) {
		t.Error("parley_account_messages_received_total does not count hr's message")
	}
	if strings.Contains(s.stderr.String(), "revoked-secret") || strings.Contains(s.stderr.String(), "hr-secret") {
		t.Error("an account's secret reached the log")
	}
}

// TestTwoOfficialAccountsThroughServe: one `parley serve` serves two
// Official Accounts, the section's own at /wechat/oa and
// wechat_oa.accounts.shop at /wechat/oa/shop (its secrets read from
// "${…}"): each answers its own follower passively, in its own
// conversation; a callback signed for one account and posted to the
// other's route is refused, and the model never sees it.
func TestTwoOfficialAccountsThroughServe(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	const (
		opsID, opsSecret, opsToken, opsKey     = "wx-ops", "ops-oa-secret", "opsOAToken", "opsOAAESKey0123456789abcdefghijklmnopqrstuv"
		shopID, shopSecret, shopToken, shopKey = "wx-shop", "shop-oa-secret", "shopOAToken", "shopOAAESKey0123456789abcdefghijklmnopqrstu"
	)
	r := redistest.New(t)
	model := openaitest.New(t)
	opsFake := wechattest.NewOfficialAccount(t, opsID, opsSecret)
	shopFake := wechattest.NewOfficialAccount(t, shopID, shopSecret)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  prefix: %q
wechat_oa:
  app_id: %s
  app_secret: %q
  token: %q
  encoding_aes_key: %q
  base_url: %q
  accounts:
    shop:
      app_id: %s
      app_secret: "${SHOP_OA_SECRET}"
      token: "${SHOP_OA_TOKEN}"
      encoding_aes_key: %q
      base_url: %q
`, r.Prefix, opsID, opsSecret, opsToken, opsKey, opsFake.URL(), shopID, shopKey, shopFake.URL()))
	env := map[string]string{"PARLEY_CONFIG": cfg, "REDIS_URL": r.URL, "OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test",
		"PARLEY_HOME": t.TempDir(), "SHOP_OA_SECRET": shopSecret, "SHOP_OA_TOKEN": shopToken}
	s := startWeChatServe(t, env)
	ops := wechattest.NewPlatform(t, opsToken, opsKey, opsID)
	shop := wechattest.NewPlatform(t, shopToken, shopKey, shopID)
	in := func(text, id string) wechattest.Inbound {
		return wechattest.Inbound{To: "gh_account", From: "o-carol", Content: text, MsgID: id}
	}
	for route, tt := range map[string]struct {
		p    *wechattest.Platform
		text string
	}{"/wechat/oa": {ops, "deploy status"}, "/wechat/oa/shop": {shop, "order status"}} {
		reply, ok := tt.p.Reply(t, wechattest.Post(t, s.base+route, tt.p.Encrypted(t, in(tt.text, "1"), true)))
		if !ok || reply.Content != "echo: "+tt.text {
			t.Errorf("%s: passive reply %+v (%v)", route, reply, ok)
		}
	}
	for route, p := range map[string]*wechattest.Platform{"/wechat/oa": shop, "/wechat/oa/shop": ops} {
		if a := wechattest.Post(t, s.base+route, p.Encrypted(t, in("forged", "2"), true)); a.Status != http.StatusForbidden {
			t.Errorf("%s took the other account's callback: %d %q", route, a.Status, a.Body)
		}
	}
	if n := model.RequestCount(); n != 2 {
		t.Errorf("the model answered %d requests, want the two accounts' own", n)
	}
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix})
	for key, want := range map[string]string{"wechat_oa:" + opsID + ":o-carol:": "deploy status", "wechat_oa/shop:" + shopID + ":o-carol:": "order status"} {
		h, err := store.History(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) == 0 || h[0].Content != want {
			t.Errorf("history %s = %+v, want it to start with %q", key, h, want)
		}
	}
	wechatEventually(t, "parley_account_up of both accounts", func() bool {
		return metricLine(s.base, `parley_account_up{account="default",channel="wechat_oa"} 1`) && metricLine(s.base, `parley_account_up{account="shop",channel="wechat_oa"} 1`)
	}, s.stderr)
	if strings.Contains(s.stderr.String(), shopSecret) || strings.Contains(s.stderr.String(), shopToken) {
		t.Error("the shop account's secrets reached the log")
	}
}

// TestAnILinkAccountThroughServe: a personal-WeChat bot logged in with
// `parley wechat login --account family` is polled by serve as that
// account's: its answer goes out through the outbox from the family
// adapter, its conversation names the account, and `parley wechat status`
// lists it under the account.
func TestAnILinkAccountThroughServe(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	r := redistest.New(t)
	model := openaitest.New(t)
	ilink := wechattest.NewILink(t)
	cfg := writeConfig(t, fmt.Sprintf("redis:\n  prefix: %q\nwechat:\n  accounts:\n    family:\n      ilink_base_url: %s\n", r.Prefix, ilink.URL()))
	env := map[string]string{"PARLEY_CONFIG": cfg, "REDIS_URL": r.URL, "OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir()}
	if out := wechatLogin(t, env, "--account", "family"); !strings.Contains(out, "for account family") || !strings.Contains(out, "account:family:") {
		t.Fatalf("login output:\n%s", out)
	}
	s := startWeChatServe(t, env)
	ilink.Add(wechattest.Message{ID: 7, From: "mum@im.wechat", Text: "dinner at six?", ContextToken: "ctx-mum"})
	wechatEventually(t, "the answer", func() bool { return len(ilink.Sends()) == 1 }, s.stderr)
	if sent := ilink.Sends()[0]; sent.To != "mum@im.wechat" || sent.Text != "echo: dinner at six?" || sent.ContextToken != "ctx-mum" {
		t.Errorf("answer %+v", sent)
	}
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix})
	h, err := store.History(t.Context(), "wechat/family:"+ilink.BotID+":mum@im.wechat:")
	if err != nil || len(h) == 0 || h[0].Content != "dinner at six?" {
		t.Errorf("the family account's history: %+v %v", h, err)
	}
	if !metricLine(s.base, `parley_account_up{account="family",channel="wechat"} 1`) {
		t.Error("parley_account_up does not show the family account up")
	}
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"wechat", "status"}, nil, &stdout, &stderr, mapEnv(env)); code != 0 {
		t.Fatalf("status exited %d: %s", code, stderr.String())
	}
	if _, fam, ok := strings.Cut(stdout.String(), "Account family:"); !ok || !strings.Contains(fam, "bot "+ilink.BotID) || !strings.Contains(fam, "context token: newest") {
		t.Errorf("status:\n%s", stdout.String())
	}
}
