package wechat

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

// FuzzWeComFrame: any frame WeCom's AI-bot socket delivers is dispatched
// without a panic; a message handed on names its sender, its chat and the
// req_id to answer on, and only a callback frame hands one on — or a
// click on a prompt card's button, as /approve ID or /deny ID.
func FuzzWeComFrame(f *testing.F) {
	for _, s := range []string{
		`{"cmd":"aibot_msg_callback","headers":{"req_id":"r1"},"body":{"msgid":"m1","aibotid":"b","chattype":"single","from":{"userid":"u1"},"msgtype":"text","text":{"content":"hi"}}}`,
		`{"cmd":"aibot_msg_callback","headers":{"req_id":"r2"},"body":{"msgid":"m2","chatid":"g1","chattype":"group","from":{"userid":"u1"},"msgtype":"mixed","mixed":{"msg_item":[{"msgtype":"text","text":{"content":"@bot hi"}}]}}}`,
		`{"cmd":"aibot_msg_callback","headers":{"req_id":"r3"},"body":{"msgid":"m3","chattype":"group","from":{"userid":"u1"},"msgtype":"image"}}`,
		`{"cmd":"aibot_event_callback","body":{"event":{"eventtype":"disconnected_event"}}}`,
		`{"cmd":"aibot_event_callback","headers":{"req_id":"r4"},"body":{"msgid":"m4","chattype":"single","from":{"userid":"u1"},"msgtype":"event","event":{"eventtype":"template_card_event","template_card_event":{"card_type":"button_interaction","event_key":"parley_approve:ABC","task_id":"parley-approval-ABC"}}}}`,
		`{"headers":{"req_id":"ping_1"},"errcode":0}`,
		`{"headers":{"req_id":""},"errcode":1}`,
		`{"cmd":"ping"}`, `{"cmd":"nope"}`, `[]`, `{"body":null}`,
	} {
		f.Add([]byte(s))
	}
	r := redistest.New(f) // New wants a client; dispatching never calls Redis
	a, err := New(Config{WeComBotID: "b", WeComSecret: config.Secret("s"), WeComWSURL: "ws://127.0.0.1:1"},
		Options{Client: r.Client, Prefix: r.Prefix}, metrics.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		f.Fatal(err)
	}
	side := newWeComSide(a)
	// The seeds reach the parser: the first is handed on, the kick ends.
	probe := &wecomConn{side: side, adapter: a, log: side.log, pending: map[string]chan wsFrame{}, closed: make(chan struct{}), wake: make(chan struct{}, 1)}
	if err := probe.dispatch(context.Background(), []byte(`{"cmd":"aibot_msg_callback","headers":{"req_id":"r1"},"body":{"msgid":"m1","chattype":"single","from":{"userid":"u1"},"msgtype":"text","text":{"content":"hi"}}}`)); err != nil || len(probe.queue) != 1 || probe.queue[0].Text != "hi" {
		f.Fatalf("a text callback: %v, queued %+v", err, probe.queue)
	}
	if err := probe.dispatch(context.Background(), []byte(`{"cmd":"aibot_event_callback","body":{"event":{"eventtype":"disconnected_event"}}}`)); err != errKicked {
		f.Fatalf("disconnected_event: %v, want errKicked", err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c := &wecomConn{side: side, adapter: a, log: side.log, pending: map[string]chan wsFrame{}, closed: make(chan struct{}), wake: make(chan struct{}, 1)}
		err := c.dispatch(context.Background(), raw)
		if err != nil && err != errKicked {
			t.Fatalf("dispatch(%q): %v", raw, err)
		}
		for _, m := range c.queue {
			if m.Channel != Name || m.Chat == "" || m.User == "" || m.Meta["req_id"] == "" || m.Meta["via"] != ViaWeCom {
				t.Fatalf("%q handed on a message it cannot be answered in: %+v", raw, m)
			}
			if m.Meta[metaCardClick] == "1" {
				verb, id, _ := strings.Cut(m.Text, " ")
				if (verb != "/approve" && verb != "/deny") || !isCardApprovalID(id) || !strings.Contains(string(raw), "template_card_event") {
					t.Fatalf("%q handed on a click %+v", raw, m)
				}
				continue
			}
			if !strings.Contains(string(raw), "aibot_msg_callback") {
				t.Fatalf("%q is no message callback, yet handed on %+v", raw, m)
			}
		}
	})
}
