package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/feishu"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/sessions"
)

// metricLine reports whether serve's /metrics has line.
func metricLine(base, line string) bool {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.Contains(string(b), line)
}

// Someone outside access.users who sends Feishu a sticker hears nothing:
// the fake Open API records no message to them. An allowed user gets the
// "I can only read text" note.
func TestAccessBeforeUnsupportedNoteFeishu(t *testing.T) {
	r := redistest.New(t)
	api := feishutest.New(t)
	cfg := writeConfig(t, fmt.Sprintf("redis:\n  prefix: %q\npolicies:\n  platforms:\n    feishu:\n      access: {users: [ou_alice]}\n", r.Prefix))
	s := startWeChatServe(t, map[string]string{
		"PARLEY_CONFIG": cfg, "REDIS_URL": r.URL, "OPENAI_BASE_URL": openaitest.New(t).URL(), "OPENAI_API_KEY": "sk-test",
		"PARLEY_HOME":   t.TempDir(),
		"FEISHU_APP_ID": "cli_e2e_" + t.Name(), "FEISHU_APP_SECRET": "app-secret",
		"FEISHU_VERIFICATION_TOKEN": e2eFeishuToken, "FEISHU_ENCRYPT_KEY": e2eFeishuKey,
		"FEISHU_BASE_URL": api.URL, "FEISHU_MODE": "webhook",
	})
	image := func(id, sender, chat string) []byte {
		return feishutest.Event(feishutest.Message{Token: e2eFeishuToken, MessageID: id, ChatID: chat, ChatType: "p2p", Sender: sender, MsgType: "sticker", Content: `{"file_key":"file_x"}`})
	}
	fs := &feishuServe{base: s.base}
	for _, ev := range [][]byte{image("om_eve", "ou_eve", "oc_eve"), image("om_alice", "ou_alice", "oc_alice")} {
		if code := fs.post(t, ev); code != http.StatusOK {
			t.Fatalf("callback answered %d", code)
		}
	}
	wechatEventually(t, "the allowed user's note and the stranger's refusal", func() bool {
		return len(api.Sent()) > 0 && metricLine(s.base, `parley_messages_rejected_total{channel="feishu",reason="access"} 1`)
	}, s.stderr)
	time.Sleep(500 * time.Millisecond) // room for a wrong send to show up
	sent := api.Sent()
	if len(sent) != 1 || sent[0].ChatID != "oc_alice" || sent[0].Text != feishu.UnsupportedNote {
		t.Fatalf("sends = %+v; want only the note to ou_alice", sent)
	}
}

// The same on WeChat: a stranger's video on the WeCom AI bot and image
// without a download on iLink gets no frame and no send; an allowed
// user's gets the note.
func TestAccessBeforeUnsupportedNoteWeChat(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	r := redistest.New(t)
	ilink := wechattest.NewILink(t)
	wecom := wechattest.NewWeCom(t, "aibot-access", "wecom-secret")
	cfg := writeConfig(t, fmt.Sprintf("redis:\n  prefix: %q\npolicies:\n  platforms:\n    wechat:\n      access: {users: [alice@im.wechat, zhangsan]}\n", r.Prefix))
	env := map[string]string{
		"PARLEY_CONFIG": cfg, "REDIS_URL": r.URL, "OPENAI_BASE_URL": openaitest.New(t).URL(), "OPENAI_API_KEY": "sk-test",
		"PARLEY_HOME": t.TempDir(), "WECHAT_ILINK_BASE_URL": ilink.URL(),
		"WECOM_BOT_ID": wecom.BotID, "WECOM_BOT_SECRET": wecom.Secret, "WECOM_WS_URL": wecom.URL(),
	}
	wechatLogin(t, env)
	s := startWeChatServe(t, env)
	wechatEventually(t, "the WeCom subscription", wecom.Connected, s.stderr)

	ilink.Add(
		wechattest.Message{ID: 1, From: "eve@im.wechat", ItemType: 2, ContextToken: "ctx-eve"},
		wechattest.Message{ID: 2, From: "alice@im.wechat", ItemType: 2, ContextToken: "ctx-alice"},
	)
	for _, cb := range []wechattest.Callback{
		{ReqID: "req-eve", MsgID: "msg-eve", ChatType: "single", User: "eve", MsgType: "video"},
		{ReqID: "req-zs", MsgID: "msg-zs", ChatType: "single", User: "zhangsan", MsgType: "video"},
	} {
		if err := wecom.SendCallback(cb); err != nil {
			t.Fatal(err)
		}
	}
	wechatEventually(t, "both notes and both refusals", func() bool {
		_, fin := wechatFinishedFrames(wecom, "req-zs")
		return fin > 0 && len(ilink.Sends()) > 0 &&
			metricLine(s.base, `parley_messages_rejected_total{channel="wechat",reason="access"} 2`)
	}, s.stderr)
	time.Sleep(500 * time.Millisecond) // room for a wrong send to show up

	if sends := ilink.Sends(); len(sends) != 1 || sends[0].To != "alice@im.wechat" || !strings.HasPrefix(sends[0].Text, "Sorry, I can only read text") {
		t.Errorf("iLink sends = %+v; want only the note to alice", sends)
	}
	if frames, _ := wechatFinishedFrames(wecom, "req-eve"); len(frames) != 0 {
		t.Errorf("the stranger's WeCom image was answered: %+v", frames)
	}
	if n := len(wecom.Frames("aibot_send_msg")); n != 0 {
		t.Errorf("%d pushed messages; want none", n)
	}
	frames, _ := wechatFinishedFrames(wecom, "req-zs")
	if last := frames[len(frames)-1].Stream(); !strings.HasPrefix(last.Content, "Sorry, I can only read text") {
		t.Errorf("zhangsan's note = %+v", last)
	}
}

// access.dms: false refuses a Slack group DM (mpim) as it refuses a DM:
// a mention there (whose event does not say it is a group DM; Parley asks
// conversations.info) and a follow-up in its thread, while a mention in a
// channel is answered.
func TestAccessDMsCoversSlackGroupDMs(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	r := redistest.New(t)
	model := openaitest.New(t)
	fake := slacktest.New(t)
	fake.SetGroupDMs("G1")
	srv := startSlackServeWith(t, r, model, fake, "policies:\n  platforms:\n    slack:\n      access: {dms: false}\n")

	const root = "1700000001.000100"
	srv.event(t, slacktest.Event("EvG1", slacktest.Mention("G1", "U1", root, "", "hello group")), 0)
	srv.event(t, slacktest.Event("EvG2", slacktest.Message("G1", "mpim", "U2", "1700000001.000200", root, "and me?")), 0)
	srv.event(t, slacktest.Event("EvD1", slacktest.Message("D1", "im", "U1", "1700000001.000300", "", "hello in private")), 0)
	srv.event(t, slacktest.Event("EvC1", slacktest.Mention("C1", "U1", "1700000001.000400", "", "hello channel")), 0)
	waitPost(t, fake, "C1", "1700000001.000400", "echo: hello channel")
	slacktest.WaitFor(t, "three refusals", slackDeadline, func() bool {
		return srv.metric(t, `parley_messages_rejected_total{channel="slack",reason="access"}`) == "3"
	})
	// Counted when refused, posted after: the group DM's second refusal
	// waits for its chat's pace (a post a second), so wait for the posts.
	var refusals []string
	slacktest.WaitFor(t, "three refusal posts", slackDeadline, func() bool {
		refusals = refusals[:0]
		for _, p := range fake.Posts() {
			if strings.Contains(p.Text, "not available to you") {
				refusals = append(refusals, p.Channel+"/"+p.ThreadTS)
			}
		}
		return len(refusals) >= 3
	})
	slices.Sort(refusals) // the DM and the group DM are answered side by side
	if got := strings.Join(refusals, ","); got != "D1/,G1/"+root+",G1/"+root {
		t.Errorf("refusals posted in %q; want two in the group DM's thread and one in the DM", got)
	}
	if n := model.RequestCount(); n != 1 {
		t.Errorf("the model saw %d requests; want only the channel's", n)
	}
}

// With access rules that treat a DM like a chat message (the default), a
// mention is answered without asking Slack whether it came from a group
// DM: the webhook's path has no Web API call on it.
func TestSlackMentionNotLookedUpWhereDMsDoNotMatter(t *testing.T) {
	r := redistest.New(t)
	model := openaitest.New(t)
	fake := slacktest.New(t)
	srv := startSlackServeWith(t, r, model, fake, "")
	srv.event(t, slacktest.Event("EvC1", slacktest.Mention("C1", "U1", "1700000001.000400", "", "hello channel")), 0)
	waitPost(t, fake, "C1", "1700000001.000400", "echo: hello channel")
	if n := fake.Count("conversations.info"); n != 0 {
		t.Fatalf("%d conversations.info calls; want none when access.dms and access.chats are unset", n)
	}
}

// An iLink message with a group_id is a group's, through a real serve:
// with access.dms: false the sender's DM is refused while the group is
// answered, in a conversation of the group's own.
func TestAccessILinkGroupIsAGroupConversation(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	r := redistest.New(t)
	ilink := wechattest.NewILink(t)
	cfg := writeConfig(t, fmt.Sprintf("redis:\n  prefix: %q\npolicies:\n  platforms:\n    wechat:\n      access: {dms: false}\n", r.Prefix))
	env := map[string]string{
		"PARLEY_CONFIG": cfg, "REDIS_URL": r.URL, "OPENAI_BASE_URL": openaitest.New(t).URL(), "OPENAI_API_KEY": "sk-test",
		"PARLEY_HOME": t.TempDir(), "WECHAT_ILINK_BASE_URL": ilink.URL(),
	}
	wechatLogin(t, env)
	s := startWeChatServe(t, env)
	ilink.Add(
		wechattest.Message{ID: 1, From: "bob@im.wechat", Text: "hello in private", ContextToken: "ctx-b1"},
		wechattest.Message{ID: 2, From: "bob@im.wechat", GroupID: "team@chatroom", Text: "hello team", ContextToken: "ctx-g1"},
	)
	wechatEventually(t, "the group's answer and the DM's refusal", func() bool {
		var group, dm bool
		for _, snd := range ilink.Sends() {
			group = group || snd.To == "team@chatroom" && snd.Text == "echo: hello team"
			dm = dm || snd.To == "bob@im.wechat" && strings.Contains(snd.Text, "not available to you")
		}
		return group && dm
	}, s.stderr)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix})
	history, err := store.History(t.Context(), "wechat:"+ilink.BotID+":team@chatroom:")
	if err != nil || len(history) != 2 || history[0].Content != "hello team" {
		t.Fatalf("group history = %+v, %v", history, err)
	}
}
