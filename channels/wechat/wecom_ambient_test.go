package wechat

import (
	"testing"

	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
)

// TestWeComGroupMessageWithoutMentionIsAmbient: a group message that
// reaches the bot with no @mention in it did not address it and is handed
// over as ambient; a group mention, and anything in a single chat, is
// addressed.
func TestWeComGroupMessageWithoutMentionIsAmbient(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := wechattest.NewWeCom(t, "aibot-amb", "s3cret")
	cfg := wecomConfig(r, f, "A")
	rn := start(t, r, cfg, nil)
	waitFor(t, "the subscription", func() bool { return rn.ch.wecom.current() != nil })
	cases := []struct {
		cb      wechattest.Callback
		ambient bool
	}{
		{wechattest.Callback{ReqID: "r1", MsgID: "m1", ChatType: "group", ChatID: "g", User: "zhangsan", Text: "the deploy failed again"}, true},
		{wechattest.Callback{ReqID: "r2", MsgID: "m2", ChatType: "group", ChatID: "g", User: "lisi", Text: "@Parley what happened?"}, false},
		{wechattest.Callback{ReqID: "r3", MsgID: "m3", ChatType: "group", ChatID: "g", User: "lisi", MsgType: "mixed", Text: "see @Parley this"}, false},
		{wechattest.Callback{ReqID: "r4", MsgID: "m4", User: "wangwu", Text: "no mention in a single chat"}, false},
	}
	for _, c := range cases {
		if err := f.SendCallback(c.cb); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every message handed over", func() bool { return len(rn.gw.messages()) == len(cases) })
	got := map[string]bool{}
	for _, m := range rn.gw.messages() {
		got[m.ID] = m.Ambient
	}
	for _, c := range cases {
		if got["wecom:"+c.cb.MsgID] != c.ambient {
			t.Errorf("%q: ambient = %v, want %v", c.cb.Text, got["wecom:"+c.cb.MsgID], c.ambient)
		}
	}
}
