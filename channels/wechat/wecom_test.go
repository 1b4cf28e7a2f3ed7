package wechat

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/channeltest"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/internal/redistest"
)

func wecomConfig(r *redistest.Redis, f *wechattest.WeCom, replica string) setup {
	cfg := testConfig(r, replica)
	cfg.WeComBotID, cfg.WeComSecret, cfg.WeComWSURL = f.BotID, config.Secret(f.Secret), f.URL()
	return cfg
}

// respondFrames are the aibot_respond_msg frames on reqID.
func respondFrames(f *wechattest.WeCom, reqID string) []wechattest.Frame {
	var out []wechattest.Frame
	for _, fr := range f.Frames("aibot_respond_msg") {
		if fr.ReqID == reqID {
			out = append(out, fr)
		}
	}
	return out
}

func finished(f *wechattest.WeCom, reqID string) bool {
	fr := respondFrames(f, reqID)
	return len(fr) > 0 && fr[len(fr)-1].Stream().Finish
}

func TestWeComGroupMentionStreamsTheAnswer(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := wechattest.NewWeCom(t, "aibot-1", "s3cret")
	cfg := wecomConfig(r, f, "A")
	rn := start(t, r, cfg, nil)
	// Not the fake's f.Connected: it counts the subscription before the
	// replica has the ack and marks itself connected.
	waitFor(t, "the subscription", func() bool {
		return rn.ch.wecom.current() != nil && counter(t, cfg.Metrics, "connected", "wechat") == 1
	})
	if err := rn.ch.Ready(); err != nil {
		t.Fatalf("Ready while connected: %v", err)
	}
	if v := counter(t, cfg.Metrics, "connected", "wechat"); v != 1 {
		t.Errorf("connected gauge = %v", v)
	}
	subs := f.Frames("aibot_subscribe")
	if len(subs) != 1 || string(subs[0].Body) != `{"bot_id":"aibot-1","secret":"s3cret"}` {
		t.Fatalf("subscribe frames = %+v", subs)
	}

	if err := f.SendCallback(wechattest.Callback{ReqID: "req-1", MsgID: "msg-1", ChatType: "group", ChatID: "grp-1", User: "zhangsan", Text: "@Parley hello there"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the finished stream", func() bool { return finished(f, "req-1") })
	frames := respondFrames(f, "req-1")
	if len(frames) < 2 {
		t.Fatalf("want a typing frame and the answer, got %d frames", len(frames))
	}
	id := frames[0].Stream().ID
	for i, fr := range frames {
		s := fr.Stream()
		if s.ID != id || s.ID == "" {
			t.Errorf("frame %d has stream id %q, want %q", i, s.ID, id)
		}
		if s.Finish != (i == len(frames)-1) {
			t.Errorf("frame %d finish=%v", i, s.Finish)
		}
	}
	if last := frames[len(frames)-1].Stream(); last.Content != "echo: hello there" {
		t.Errorf("final content = %q", last.Content)
	}
	got := rn.gw.messages()
	if len(got) != 1 {
		t.Fatalf("gateway got %d messages", len(got))
	}
	m := got[0]
	if m.Text != "hello there" || m.Chat != "grp-1" || m.User != "zhangsan" || m.DM || m.Workspace != "aibot-1" || m.ID != "wecom:msg-1" || m.Meta["req_id"] != "req-1" {
		t.Errorf("message = %+v", m)
	}

	// The same msgid again (a redelivery) is not answered twice.
	if err := f.SendCallback(wechattest.Callback{ReqID: "req-1b", MsgID: "msg-1", ChatType: "group", ChatID: "grp-1", User: "zhangsan", Text: "@Parley hello there"}); err != nil {
		t.Fatal(err)
	}
	// A mixed message in a single chat: the conversation is the user.
	if err := f.SendCallback(wechattest.Callback{ReqID: "req-2", MsgID: "msg-2", User: "lisi", MsgType: "mixed", Text: "look at this"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mixed answer", func() bool { return finished(f, "req-2") })
	if fr := respondFrames(f, "req-2"); fr[len(fr)-1].Stream().Content != "echo: look at this" {
		t.Errorf("mixed answer = %q", fr[len(fr)-1].Stream().Content)
	}
	if got := rn.gw.messages(); len(got) != 2 || got[1].Chat != "lisi" || !got[1].DM {
		t.Errorf("messages = %+v", got)
	}
	// A video gets one short note, from the gateway (after its access
	// rules): the adapter hands it over.
	if err := f.SendCallback(wechattest.Callback{ReqID: "req-3", MsgID: "msg-3", User: "lisi", MsgType: "video"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the note", func() bool { return finished(f, "req-3") })
	if fr := respondFrames(f, "req-3"); fr[len(fr)-1].Stream().Content != unsupportedNote {
		t.Errorf("note = %q", fr[len(fr)-1].Stream().Content)
	}
	if got := rn.gw.messages(); len(got) != 3 || got[2].Unsupported != unsupportedNote || got[2].Text != "" || got[2].User != "lisi" {
		t.Errorf("messages = %+v", got)
	}
	if len(respondFrames(f, "req-1b")) != 0 {
		t.Error("a duplicate msgid was answered")
	}
	// Heartbeats flow.
	waitFor(t, "pings", func() bool { return len(f.Frames("ping")) >= 2 })
}

func TestWeComReconnectsAfterTheServerDropsTheConnection(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := wechattest.NewWeCom(t, "aibot-1", "s3cret")
	cfg := wecomConfig(r, f, "A")
	rn := start(t, r, cfg, nil)
	waitFor(t, "the subscription", f.Connected)
	f.Drop()
	// An answer made while the connection is down is delivered after the
	// reconnect (queued, or sent on the new connection).
	m := channels.Message{Channel: Name, Workspace: "aibot-1", Chat: "u", Meta: map[string]string{
		"via": ViaWeCom, "req_id": "req-gap", "chatid": "u", "recv_ms": strconv.FormatInt(time.Now().UnixMilli(), 10)}}
	if err := rn.ch.Send(context.Background(), m, channels.Reply{Text: "across the gap"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a second subscription", func() bool { return f.Subscribes() == 2 && f.Connected() })
	waitFor(t, "the answer made during the gap", func() bool { return finished(f, "req-gap") })
	if n := counter(t, cfg.Metrics, "reconnects", "wechat"); n < 1 {
		t.Errorf("reconnects = %v", n)
	}
	if err := f.SendCallback(wechattest.Callback{ReqID: "req-9", MsgID: "msg-9", User: "u", Text: "still there?"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the answer on the new connection", func() bool { return finished(f, "req-9") })
	if fr := respondFrames(f, "req-9"); fr[0].Conn != 2 {
		t.Errorf("answered on connection %d, want 2", fr[0].Conn)
	}
}

func TestWeComExpiredReqIDFallsBackToSendMsg(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := wechattest.NewWeCom(t, "aibot-1", "s3cret")
	cfg := wecomConfig(r, f, "A")
	start(t, r, cfg, nil)
	waitFor(t, "the subscription", f.Connected)
	f.ExpireReqID("req-old", 846609)
	if err := f.SendCallback(wechattest.Callback{ReqID: "req-old", MsgID: "m-old", ChatType: "group", ChatID: "grp-9", User: "u", Text: "@bot late"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pushed answer", func() bool { return len(f.Frames("aibot_send_msg")) == 1 })
	chat, content := f.Frames("aibot_send_msg")[0].Markdown()
	if chat != "grp-9" || content != "echo: late" {
		t.Fatalf("pushed %q to %q", content, chat)
	}
	if n := counter(t, cfg.Metrics, "api", "wechat", "846609"); n < 1 {
		t.Errorf("api errors = %v", n)
	}
}

func TestWeComBadInputIsCountedAndNeverEndsTheLoop(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := wechattest.NewWeCom(t, "aibot-1", "s3cret")
	cfg := wecomConfig(r, f, "A")
	start(t, r, cfg, nil)
	waitFor(t, "the subscription", f.Connected)
	for _, raw := range []string{
		`not json`,
		`{"cmd":"aibot_mystery","headers":{"req_id":"x"},"body":{}}`,
		`{"cmd":"aibot_msg_callback","headers":{"req_id":"r"},"body":{"msgtype":"text","text":{"content":"no ids"}}}`,
		`{"cmd":"aibot_msg_callback","headers":{"req_id":"r2"},"body":"a string"}`,
	} {
		if err := f.SendRaw([]byte(raw)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.SendCallback(wechattest.Callback{ReqID: "req-ok", MsgID: "m-ok", User: "u", Text: "fine"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the good message's answer", func() bool { return finished(f, "req-ok") })
	if f.Subscribes() != 1 {
		t.Errorf("bad input caused a reconnect (%d subscriptions)", f.Subscribes())
	}
	for reason, want := range map[string]float64{"bad_frame": 2, "unknown_cmd": 1, "missing_fields": 1} {
		if n := counter(t, cfg.Metrics, "rejected", "wechat", reason); n != want {
			t.Errorf("rejected %s = %v, want %v", reason, n, want)
		}
	}
}

func TestWeComOneConnectionAcrossReplicas(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := wechattest.NewWeCom(t, "aibot-1", "s3cret")
	cfgA, cfgB := wecomConfig(r, f, "A"), wecomConfig(r, f, "B")
	a := start(t, r, cfgA, nil)
	waitFor(t, "A's subscription", f.Connected)
	b := start(t, r, cfgB, nil)
	time.Sleep(1500 * time.Millisecond) // more than a lease TTL
	if f.Subscribes() != 1 || f.MaxLive() != 1 {
		t.Fatalf("subscriptions = %d, max live = %d; want one connection", f.Subscribes(), f.MaxLive())
	}
	// A reply made on B (no connection there) goes through the queue to A.
	m := channels.Message{Channel: Name, Workspace: "aibot-1", Chat: "grp", Meta: map[string]string{
		"via": ViaWeCom, "req_id": "req-q", "chatid": "grp", "recv_ms": strconv.FormatInt(time.Now().UnixMilli(), 10)}}
	if err := b.ch.Send(context.Background(), m, channels.Reply{Text: "from B"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the queued answer", func() bool { return finished(f, "req-q") })
	if fr := respondFrames(f, "req-q"); fr[len(fr)-1].Stream().Content != "from B" {
		t.Errorf("queued answer = %q", fr[len(fr)-1].Stream().Content)
	}
	// A stops: B takes over the connection.
	a.stop()
	waitFor(t, "B's subscription", func() bool { return f.Subscribes() == 2 && f.Connected() })
	if err := f.SendCallback(wechattest.Callback{ReqID: "req-b", MsgID: "m-b", User: "u", Text: "hi B"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B's answer", func() bool { return finished(f, "req-b") })
	if got := b.gw.messages(); len(got) != 1 || got[0].Text != "hi B" {
		t.Fatalf("B accepted %+v", got)
	}
}

// TestWeComUnknownErrcodeIsAFixedLabel: an errcode outside the known set
// is counted as code="other", so the label keeps a fixed set of values,
// and its number goes to the log.
func TestWeComUnknownErrcodeIsAFixedLabel(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := wechattest.NewWeCom(t, "aibot-1", "s3cret")
	cfg := wecomConfig(r, f, "A")
	var logs channeltest.LogBuffer
	cfg.Log = slog.New(slog.NewTextHandler(&logs, nil))
	start(t, r, cfg, nil)
	waitFor(t, "the subscription", f.Connected)
	f.ExpireReqID("req-odd", 777001)
	if err := f.SendCallback(wechattest.Callback{ReqID: "req-odd", MsgID: "m-odd", ChatType: "single", User: "u", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pushed answer", func() bool { return len(f.Frames("aibot_send_msg")) == 1 })
	if n := counter(t, cfg.Metrics, "api", "wechat", "other"); n < 1 {
		t.Errorf("api errors{code=other} = %v", n)
	}
	if n := counter(t, cfg.Metrics, "api", "wechat", "777001"); n != 0 {
		t.Errorf("the raw errcode became a label value")
	}
	waitFor(t, "the errcode in the log", func() bool { return strings.Contains(logs.String(), "777001") })
}

func TestWeComWrongSecretIsReportedAndRetried(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := wechattest.NewWeCom(t, "aibot-1", "s3cret")
	cfg := wecomConfig(r, f, "A")
	cfg.WeComSecret = "wrong"
	rn := start(t, r, cfg, nil)
	waitFor(t, "two refused subscriptions", func() bool { return len(f.Frames("aibot_subscribe")) >= 2 })
	if n := counter(t, cfg.Metrics, "api", "wechat", "40058"); n < 1 {
		t.Errorf("api errors 40058 = %v", n)
	}
	waitFor(t, "readiness to degrade", func() bool { return rn.ch.Ready() != nil })
}
