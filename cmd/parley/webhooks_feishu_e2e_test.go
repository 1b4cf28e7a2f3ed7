package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/internal/redistest"
)

// feishuWebhookConfig is the triggers: section of an Alertmanager webhook
// posting to the ops group oc_ops of the fake Feishu (whose events carry
// the tenant key tenant1: the workspace of a Feishu destination).
const feishuWebhookConfig = `triggers:
  webhooks:
    am:
      kind: alertmanager
      token: am-s3cret
      to: {platform: feishu, workspace: tenant1, chat: oc_ops}
`

// startFeishuHookServe runs `parley serve` in-process on r, model and
// api (Feishu callbacks over HTTP), with the config's extra, and returns
// its base URL.
func startFeishuHookServe(t *testing.T, r *redistest.Redis, model *openaitest.Server, api *feishutest.Server, extra string) string {
	t.Helper()
	addr := freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf("redis:\n  prefix: %q\ngateway:\n  shutdown_timeout: 10s\n", r.Prefix)+extra)
	getenv := mapEnv(map[string]string{
		"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_LISTEN": addr, "PARLEY_HOME": t.TempDir(),
		"REDIS_URL": r.URL, "FEISHU_APP_ID": "cli_e2e_hooks", "FEISHU_APP_SECRET": "app-secret",
		"FEISHU_VERIFICATION_TOKEN": e2eFeishuToken, "FEISHU_ENCRYPT_KEY": e2eFeishuKey,
		"FEISHU_BASE_URL": api.URL, "FEISHU_MODE": "webhook",
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	stderr := &syncBuffer{}
	go func() { done <- run(ctx, []string{"serve", "--config", cfg}, nil, io.Discard, stderr, getenv) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited %d:\n%s", code, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not stop")
		}
		if t.Failed() {
			t.Logf("serve %s:\n%s", addr, stderr.String())
		}
	})
	base := "http://" + addr
	waitFor(t, base+"/readyz", stderr)
	return base
}

// feishuCallback sends an encrypted, signed event to base and returns the
// status.
func feishuCallback(t *testing.T, base string, event []byte) int {
	t.Helper()
	req := feishutest.Request(base+"/feishu/events", feishutest.Encrypted(event, e2eFeishuKey), e2eFeishuKey, time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// opsSent are the messages sent to the group oc_ops (the root, made in
// the chat) or in the thread of root, whose text has substr.
func opsSent(api *feishutest.Server, root, substr string) []feishutest.Sent {
	var out []feishutest.Sent
	for _, s := range api.Sent() {
		if (s.Kind == "create" && s.ChatID == "oc_ops" || s.Kind == "reply" && s.ReplyTo == root) && strings.Contains(s.Text, substr) {
			out = append(out, s)
		}
	}
	return out
}

// waitSent waits until cond holds of what the fake Feishu was sent.
func waitSent(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRealAlertmanagerFiringAndResolvedReachOneFeishuGroupThread: a real
// Alertmanager's firing alert is one root message in the group, a second
// alert of the group a reply in the root's thread, the resolution a reply
// and the root redrawn to show it; then a person replying in that thread,
// at another replica, in a normal group and in a topic group (whose
// events name the topic by an omt_ id as well as its root), continues the
// alert's conversation: the model sees the alert's posts.
func TestRealAlertmanagerFiringAndResolvedReachOneFeishuGroupThread(t *testing.T) {
	for _, chatType := range []string{"group", "topic_group"} {
		t.Run(chatType, func(t *testing.T) {
			r := redistest.New(t)
			model := openaitest.New(t)
			api := feishutest.New(t)
			a := startFeishuHookServe(t, r, model, api, feishuWebhookConfig)
			b := startFeishuHookServe(t, r, model, api, feishuWebhookConfig)
			am := startAlertmanager(t, a)

			fire(t, am, time.Time{}, "db-1")
			waitSent(t, "the root message", func() bool { return len(opsSent(api, "", "[FIRING:1] DiskFull")) > 0 })
			rootMsg := opsSent(api, "", "[FIRING:1] DiskFull")[0]
			root := rootMsg.MessageID
			if rootMsg.Kind != "create" || rootMsg.MsgType != "interactive" {
				t.Fatalf("root = %+v; want a card made in the group", rootMsg)
			}
			fire(t, am, time.Time{}, "db-1", "db-2")
			waitSent(t, "the second alert in the thread", func() bool { return len(opsSent(api, root, "[FIRING:2] DiskFull")) > 0 })
			fire(t, am, time.Now(), "db-1", "db-2")
			waitSent(t, "the resolution in the thread, and the root redrawn", func() bool {
				return len(opsSent(api, root, "[RESOLVED:2] DiskFull")) > 0 && len(api.Edits()) > 0
			})
			for _, s := range api.Sent() {
				if s.MessageID != root && (s.Kind != "reply" || s.ReplyTo != root || !s.ReplyInThread) {
					t.Fatalf("a message outside the root's thread: %+v", s)
				}
			}
			if n := len(api.Sent()); n != 3 {
				t.Fatalf("%d messages sent; want the root and two replies in its thread", n)
			}
			edits := api.Edits()
			if len(edits) != 1 || edits[0].Op != feishutest.OpPatch || edits[0].MessageID != root || !strings.HasPrefix(edits[0].Content, "✅ **[RESOLVED:2] DiskFull**") {
				t.Fatalf("edits %+v; want the root's card redrawn once to show RESOLVED", edits)
			}

			// A person replies in the alert's thread, without a mention.
			reply := feishutest.Message{Token: e2eFeishuToken, MessageID: "om_person", RootID: root, ParentID: root, ThreadID: "omt_ops",
				ChatID: "oc_ops", ChatType: chatType, Sender: "ou_oncall", Content: feishutest.Text("was it the backup job?")}
			if code := feishuCallback(t, b, feishutest.Event(reply)); code != 200 {
				t.Fatalf("the person's reply: %d", code)
			}
			waitSent(t, "the answer in the thread", func() bool {
				for _, s := range api.Sent() {
					if s.ReplyTo == "om_person" {
						return true
					}
				}
				return false
			})
			reqs := model.Requests()
			if len(reqs) != 1 {
				t.Fatalf("the model saw %d requests; want the person's reply only", len(reqs))
			}
			// The alert's posts, as the webhook's untrusted data, then the
			// person's reply.
			msgs := reqs[0].Messages[1:]
			want := []string{"[FIRING:1] DiskFull", "[FIRING:2] DiskFull", "[RESOLVED:2] DiskFull", "was it the backup job?"}
			if len(msgs) != len(want) {
				t.Fatalf("the reply's turn has %d messages after the system prompt; want the alert's 3 posts and the reply: %+v", len(msgs), msgs)
			}
			for i, m := range msgs {
				post := i < 3
				if m.Role != "user" || !strings.Contains(m.Content, want[i]) || post != strings.HasPrefix(m.Content, "webhook:am posted in this chat:") ||
					post != strings.Contains(m.Content, "<tool_result") {
					t.Errorf("message %d = %s %q; want %q (a post as untrusted data: %v)", i, m.Role, m.Content, want[i], post)
				}
			}
			for _, s := range api.Sent() {
				if s.ReplyTo == "om_person" && (!s.ReplyInThread || s.Text != "echo: was it the backup job?") {
					t.Errorf("answer %+v; want it in the thread", s)
				}
			}
		})
	}
}

// TestAlertGroupIsOneFeishuThreadAcrossTwoReplicasAndHAPeers: an HA pair
// of Alertmanagers sending the same notification to two replicas posts it
// once; the group's later notifications, at either replica, reply in the
// one thread.
func TestAlertGroupIsOneFeishuThreadAcrossTwoReplicasAndHAPeers(t *testing.T) {
	r := redistest.New(t)
	model := openaitest.New(t)
	api := feishutest.New(t)
	a := startFeishuHookServe(t, r, model, api, feishuWebhookConfig)
	b := startFeishuHookServe(t, r, model, api, feishuWebhookConfig)
	for _, base := range []string{a, b} {
		if got := postHook(t, base, "am-s3cret", amNotification("firing", "db-1")); got != 200 {
			t.Fatalf("firing: %d", got)
		}
	}
	waitSent(t, "the root message", func() bool { return len(opsSent(api, "", "[FIRING:1] DiskFull")) > 0 })
	root := opsSent(api, "", "[FIRING:1] DiskFull")[0].MessageID
	if got := postHook(t, b, "am-s3cret", amNotification("firing", "db-1", "db-2")); got != 200 {
		t.Fatalf("second: %d", got)
	}
	for _, base := range []string{b, a} {
		if got := postHook(t, base, "am-s3cret", amNotification("resolved", "db-1", "db-2")); got != 200 {
			t.Fatalf("resolved: %d", got)
		}
	}
	waitSent(t, "the resolution in the thread, and the root redrawn", func() bool {
		return len(opsSent(api, root, "[RESOLVED:2] DiskFull")) > 0 && len(api.Edits()) > 0
	})
	for _, text := range []string{"[FIRING:1] DiskFull", "[FIRING:2] DiskFull", "[RESOLVED:2] DiskFull"} {
		if n := len(opsSent(api, root, text)); n != 1 {
			t.Errorf("%q sent %d times; want once", text, n)
		}
	}
	if edits := api.Edits(); len(edits) != 1 || edits[0].MessageID != root {
		t.Errorf("edits %+v; want the root redrawn once", edits)
	}
	if model.RequestCount() != 0 {
		t.Error("answer: post reached the model")
	}
}
