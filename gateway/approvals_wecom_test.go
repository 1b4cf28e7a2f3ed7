package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/wechat"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

// TestApprovalByWeComTemplateCard: on a WeCom AI bot the prompt finishes
// the answer's stream with its text and a button_interaction card; a
// non-approver's click and a click on another approval change nothing;
// the requester's Approve runs the call once and replaces the card on the
// click's req_id; the model's answer follows; a late click on the old
// card decides nothing more (it hears the approval was already given).
func TestApprovalByWeComTemplateCard(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ledger, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	f := wechattest.NewWeCom(t, "aibot-approve", "s3cret")
	ch, err := wechat.New(wechat.Config{WeComBotID: "aibot-approve", WeComSecret: "s3cret", WeComWSURL: f.URL()}, wechat.Options{
		Client: r.Client, Prefix: r.Prefix, HTTP: wechattest.ReplicaClient("A"),
		LeaseTTL: 900 * time.Millisecond, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		PingInterval: 100 * time.Millisecond, AckTimeout: 2 * time.Second,
	}, metrics.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newApprovalReplicaWith(t, r, mcpURL, model, ch, time.Hour, time.Hour, wechat.Name)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ch.Run(ctx, a.gw) }()
	t.Cleanup(func() { cancel(); <-done })
	until(t, "the subscription", f.Connected)

	if err := f.SendCallback(wechattest.Callback{ReqID: "req-ask", MsgID: "msg-ask", User: "zhangsan", Text: "log from wecom"}); err != nil {
		t.Fatal(err)
	}
	var card wechattest.TemplateCard
	until(t, "the prompt with its card", func() bool {
		for _, fr := range f.Frames("aibot_respond_msg") {
			if typ, _, c := fr.Card(); fr.ReqID == "req-ask" && typ == "stream_with_template_card" {
				card = c
				return true
			}
		}
		return false
	})
	if card.CardType != "button_interaction" || len(card.Buttons) != 2 || !strings.Contains(card.MainTitle.Desc, "ledger__append") {
		t.Fatalf("the card %+v", card)
	}
	approveKey := card.Buttons[0].Key

	// A non-approver (in a DM that is not theirs: another conversation)
	// and a key naming another approval: nothing decided, no card update.
	if err := f.SendCardClick(wechattest.CardClick{ReqID: "req-c1", MsgID: "c1", User: "lisi", EventKey: approveKey, TaskID: card.TaskID}); err != nil {
		t.Fatal(err)
	}
	if err := f.SendCardClick(wechattest.CardClick{ReqID: "req-c2", MsgID: "c2", User: "zhangsan", EventKey: "parley_approve:NOSUCH", TaskID: "parley-approval-NOSUCH"}); err != nil {
		t.Fatal(err)
	}
	// Approve.
	if err := f.SendCardClick(wechattest.CardClick{ReqID: "req-c3", MsgID: "c3", User: "zhangsan", EventKey: approveKey, TaskID: card.TaskID}); err != nil {
		t.Fatal(err)
	}
	var updated wechattest.TemplateCard
	until(t, "the card replaced", func() bool {
		for _, fr := range f.Frames("aibot_respond_update_msg") {
			if _, rt, c := fr.Card(); fr.ReqID == "req-c3" && rt == "update_template_card" {
				updated = c
				return true
			}
		}
		return false
	})
	if updated.MainTitle.Title != "Approved" || !strings.Contains(updated.MainTitle.Desc, "zhangsan") || updated.TaskID != card.TaskID ||
		len(updated.Buttons) != 1 || strings.HasPrefix(updated.Buttons[0].Key, "parley_approve:") {
		t.Errorf("the replaced card %+v", updated)
	}
	until(t, "the model's answer", func() bool {
		for _, fr := range f.Frames("aibot_send_msg") {
			if strings.Contains(string(fr.Body), "done: appended line 1") {
				return true
			}
		}
		for _, fr := range f.Frames("aibot_respond_msg") {
			if fr.Stream().Content == "done: appended line 1" {
				return true
			}
		}
		return false
	})
	// A late click on the old card: already approved, nothing runs again.
	if err := f.SendCardClick(wechattest.CardClick{ReqID: "req-c4", MsgID: "c4", User: "zhangsan", EventKey: approveKey, TaskID: card.TaskID}); err != nil {
		t.Fatal(err)
	}
	// Clicks and messages reach the gateway in order: once a later
	// message is answered, the late click has been decided.
	if err := f.SendCallback(wechattest.Callback{ReqID: "req-after", MsgID: "msg-after", User: "zhangsan", Text: "after"}); err != nil {
		t.Fatal(err)
	}
	until(t, "the answer to a later message", func() bool {
		for _, fr := range f.Frames("aibot_respond_msg") {
			if fr.ReqID == "req-after" && fr.Stream().Content == "echo: after" {
				return true
			}
		}
		return false
	})
	if got := ledger.appended(); len(got) != 1 || got[0] != "from wecom" {
		t.Errorf("the ledger holds %q", got)
	}
	for _, fr := range f.Frames("aibot_respond_update_msg") {
		switch _, _, c := fr.Card(); fr.ReqID {
		case "req-c3":
		case "req-c4":
			// The late click hears it was already approved: at most the
			// card drawn as decided again, with nothing left to click.
			if c.MainTitle.Title != "Approved" || len(c.Buttons) != 1 || strings.HasPrefix(c.Buttons[0].Key, "parley_approve:") {
				t.Errorf("the late click drew the card %+v", c)
			}
		default:
			t.Errorf("a refused click updated the card: %s", fr.Body)
		}
	}
}
