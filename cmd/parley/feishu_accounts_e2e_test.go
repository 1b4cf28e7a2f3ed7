package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
)

// TestTwoFeishuAppsInOneGroup: `parley serve` runs two Feishu apps of one
// tenant ("Ops Bot", the section's own, and "HR Helper",
// feishu.accounts.hr) in the same group. Feishu delivers each group
// message to both apps (each sealed with its app's key, at its app's
// route); each app answers its own @mention once, from its own bot, and
// neither answers the other's. HR Helper's account level gives it its
// profile and no tools, which Ops Bot keeps.
func TestTwoFeishuAppsInOneGroup(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, port and home
	const hrKey, hrToken = "hr-encrypt-me", "hr-verify-me"
	hr := feishutest.App{AppID: "cli_hr", AppSecret: "hr-app-secret", BotOpenID: "ou_hr_bot"}
	api := feishutest.New(t)
	api.AddApp(hr)
	s := startFeishuServeOn(t, api, `feishu:
  accounts:
    hr:
      app_id: cli_hr
      app_secret: hr-app-secret
      verification_token: `+hrToken+`
      encrypt_key: `+hrKey+`
profiles:
  hr:
    display_name: HR Helper
    system_prompt_append: `+hrPrompt+`
policies:
  platforms:
    feishu:
      accounts:
        hr:
          profile: hr
          tools: {allow: []}
`, nil)
	deliver := func(path, token, key string, m feishutest.Message) int {
		t.Helper()
		m.Token = token
		resp, err := http.DefaultClient.Do(feishutest.Request(s.base+path, feishutest.Encrypted(feishutest.Event(m), key), key, time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	group := []feishutest.Message{
		{MessageID: "om_ops_1", ChatID: "oc_shared", ChatType: "group", Sender: "ou_alice", Content: feishutest.Text("@_user_1 deploy status"),
			Mentions: []feishutest.Mention{{Key: "@_user_1", OpenID: feishutest.BotOpenID, Name: "Ops Bot"}}},
		{MessageID: "om_hr_1", ChatID: "oc_shared", ChatType: "group", Sender: "ou_alice", Content: feishutest.Text("@_user_1 holiday policy"),
			Mentions: []feishutest.Mention{{Key: "@_user_1", OpenID: hr.BotOpenID, Name: "HR Helper"}}},
	}
	for range 2 { // and Feishu re-pushes
		for _, m := range group {
			if st := deliver("/feishu/events", e2eFeishuToken, e2eFeishuKey, m); st != http.StatusOK {
				t.Fatalf("ops route: %d", st)
			}
			if st := deliver("/feishu/events/hr", hrToken, hrKey, m); st != http.StatusOK {
				t.Fatalf("hr route: %d", st)
			}
		}
	}
	if st := deliver("/feishu/events/hr", e2eFeishuToken, e2eFeishuKey, group[1]); st == http.StatusOK {
		t.Error("the hr route took a callback sealed with the ops app's key")
	}
	answered := func(bot, text string) int {
		n := 0
		for _, m := range s.api.SentBy(bot) {
			if strings.Contains(m.Text, text) {
				n++
			}
		}
		return n
	}
	pollUntil(t, "both answers", s.stderr, func() bool {
		return answered(feishutest.BotOpenID, "echo: deploy status") > 0 && answered(hr.BotOpenID, "echo: holiday policy") > 0
	})
	// A marker through each app after the re-pushes: once it is answered,
	// a second answer to the re-pushed mention would have been too.
	marker := func(id, bot, text string) feishutest.Message {
		return feishutest.Message{MessageID: id, ChatID: "oc_shared", ChatType: "group", Sender: "ou_alice", Content: feishutest.Text("@_user_1 " + text),
			Mentions: []feishutest.Mention{{Key: "@_user_1", OpenID: bot, Name: "bot"}}}
	}
	deliver("/feishu/events", e2eFeishuToken, e2eFeishuKey, marker("om_ops_2", feishutest.BotOpenID, "ops marker"))
	deliver("/feishu/events/hr", hrToken, hrKey, marker("om_hr_2", hr.BotOpenID, "hr marker"))
	pollUntil(t, "the markers", s.stderr, func() bool {
		return answered(feishutest.BotOpenID, "echo: ops marker") > 0 && answered(hr.BotOpenID, "echo: hr marker") > 0
	})
	for _, c := range []struct{ bot, text string }{
		{feishutest.BotOpenID, "echo: deploy status"}, {hr.BotOpenID, "echo: holiday policy"},
	} {
		if n := answered(c.bot, c.text); n != 1 {
			t.Errorf("%s answered %q %d times", c.bot, c.text, n)
		}
	}
	if n := answered(hr.BotOpenID, "deploy status") + answered(feishutest.BotOpenID, "holiday policy"); n != 0 {
		t.Errorf("an app answered the other's mention %d times", n)
	}
	// HR Helper's turns run with its account level's profile and no
	// tools; Ops Bot's with the default prompt and its tools.
	hrSystem := sameSystemMessage(t, s.model, "holiday policy", "hr marker")
	if got := systemContent(t, hrSystem); !strings.Contains(got, agent.DefaultSystemPrompt+"\n\n"+hrPrompt) {
		t.Errorf("HR Helper's system prompt is not the default with hr's lines appended:\n%s", got)
	}
	if got := systemContent(t, sameSystemMessage(t, s.model, "deploy status", "ops marker")); strings.Contains(got, hrPrompt) {
		t.Errorf("Ops Bot's system prompt has hr's lines:\n%s", got)
	}
	for _, req := range s.model.Requests() {
		last := req.Messages[len(req.Messages)-1].Content
		hrTurn := strings.Contains(last, "holiday policy") || strings.Contains(last, "hr marker")
		if tools := offeredTools(req); hrTurn != (len(tools) == 0) {
			t.Errorf("a turn of %q was offered %v", last, tools)
		}
	}
	if strings.Contains(s.stderr.String(), "hr-app-secret") || strings.Contains(s.stderr.String(), hrKey) {
		t.Error("the hr app's credentials reached the log")
	}
}
