package main

import (
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
