package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/wechat"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// TestWeComGroupAmbientMessagesReachTheNextMentionOnce: on the fake WeCom,
// group messages that do not @mention the bot are not answered (no frame
// on their req_id); the next mention's turn holds them inside the room's
// envelope, and the mention after that holds none of them.
func TestWeComGroupAmbientMessagesReachTheNextMentionOnce(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	model := openaitest.New(t)
	f := wechattest.NewWeCom(t, "aibot-room", "s3cret")
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ch, err := wechat.New(wechat.Config{WeComBotID: "aibot-room", WeComSecret: "s3cret", WeComWSURL: f.URL()}, wechat.Options{
		Client: r.Client, Prefix: r.Prefix, HTTP: wechattest.ReplicaClient("A"),
		LeaseTTL: 900 * time.Millisecond, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		PingInterval: 100 * time.Millisecond, AckTimeout: 2 * time.Second,
	}, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Second})
	a := agent.New(agent.Config{Model: "test", Timeout: 5 * time.Second}, agent.NewClient(model.URL(), "sk", nil), agent.NewRegistry(), m, log)
	gw := gateway.New(gateway.Config{}, store, a, m, log)
	gw.Register(ch)
	gw.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ch.Run(ctx, gw) }()
	t.Cleanup(func() {
		cancel()
		<-done
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := gw.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	until(t, "the subscription", f.Connected)

	send := func(req, id, user, text string) {
		t.Helper()
		if err := f.SendCallback(wechattest.Callback{ReqID: req, MsgID: id, ChatType: "group", ChatID: "grp-ops", User: user, Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	answered := func(req string) bool {
		for _, fr := range f.Frames("aibot_respond_msg") {
			if fr.ReqID == req && fr.Stream().Finish {
				return true
			}
		}
		return false
	}
	send("r1", "a1", "zhangsan", "the 09:12 deploy failed on db-3")
	send("r1b", "a1", "zhangsan", "the 09:12 deploy failed on db-3") // re-delivered
	send("r2", "a2", "lisi", "rolled back, watching the error rate")
	send("r3", "m1", "wangwu", "@Parley summarise what happened")
	until(t, "the mention answered", func() bool { return answered("r3") })
	send("r4", "m2", "wangwu", "@Parley anything else?")
	until(t, "the second mention answered", func() bool { return answered("r4") })

	for _, req := range []string{"r1", "r1b", "r2"} {
		for _, fr := range f.Frames("aibot_respond_msg") {
			if fr.ReqID == req {
				t.Errorf("the ambient message on %s was answered: %+v", req, fr.Stream())
			}
		}
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model saw %d requests, want 2 (the ambient messages are no turns)", len(reqs))
	}
	room := roomOf(t, lastUser(t, reqs, 1))
	if strings.Count(room, "zhangsan: the 09:12 deploy failed on db-3") != 1 || !strings.Contains(room, "lisi: rolled back") {
		t.Errorf("first room = %q, want both ambient messages, once each", room)
	}
	if !strings.HasSuffix(lastUser(t, reqs, 1), "summarise what happened") {
		t.Errorf("user turn = %q", lastUser(t, reqs, 1))
	}
	if u := lastUser(t, reqs, 2); strings.Contains(u, "<tool_result") {
		t.Errorf("second turn = %q, want no room", u)
	}
}
