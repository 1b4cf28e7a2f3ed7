package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/officialaccount"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/channels/wechat/wecomapp"
	"github.com/parleyhq/parley/channels/wechat/wxapi"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway/approval"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

// serveChannel runs ch with a's gateway and serves its callback routes
// until the test ends.
func serveChannel(t *testing.T, a *approvalReplica, ch interface {
	channels.Runner
	channels.HTTPChannel
}) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	ch.Mount(mux)
	srv := httptest.NewServer(mux)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ch.Run(ctx, a.gw) }()
	t.Cleanup(func() { srv.Close(); cancel(); <-done })
	return srv
}

// codeIn is the code of the first text prompt among texts.
func codeIn(texts []string) string {
	for _, s := range texts {
		if i := strings.Index(s, "/approve "); i >= 0 && len(s) >= i+15 {
			return s[i+9 : i+15]
		}
	}
	return ""
}

// TestApprovalOnWeComApp: on a WeCom app the prompt is a text with a
// code (an app message); the requester's /approve runs the call once and
// the model's answer follows; a second prompt is denied with /deny and
// nothing more is written.
func TestApprovalOnWeComApp(t *testing.T) {
	t.Parallel()
	const (
		corp, secret, token, key = "ww-approve-corp", "approve-app-secret", "approveAppToken", "approveAppAESKey0123456789abcdefghijklmnopq"
		agentID                  = 1000002
	)
	r := redistest.New(t)
	ledger, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	fake := wechattest.NewWeComApp(t, corp, secret, agentID)
	ch, err := wecomapp.New(wecomapp.Config{Apps: []wecomapp.App{{Name: "ops", CorpID: corp, AgentID: agentID, Secret: config.Secret(secret),
		Token: config.Secret(token), EncodingAESKey: config.Secret(key), BaseURL: fake.URL()}}},
		wecomapp.Options{Redis: r.Client, Prefix: r.Prefix, API: wxapi.ClientOptions{HTTP: wechattest.ReplicaClient("A"), RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond}},
		metrics.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newApprovalReplicaWith(t, r, mcpURL, model, ch, time.Hour, time.Hour, wecomapp.Name)
	srv := serveChannel(t, a, ch)
	platform := wechattest.NewPlatform(t, token, key, corp)
	msgID := 770000
	say := func(text string) {
		t.Helper()
		msgID++
		ans := wechattest.Post(t, srv.URL+wecomapp.PathPrefix+"ops", platform.Encrypted(t, wechattest.Inbound{
			To: corp, From: "zhangsan", Content: text, MsgID: strconv.Itoa(msgID), AgentID: strconv.Itoa(agentID)}, false))
		if ans.Status != http.StatusOK {
			t.Fatalf("callback %q answered %d %s", text, ans.Status, ans.Body)
		}
	}
	texts := func() []string {
		var out []string
		for _, m := range fake.Messages() {
			out = append(out, m.Content())
		}
		return out
	}
	has := func(want string) func() bool {
		return func() bool {
			for _, s := range texts() {
				if s == want {
					return true
				}
			}
			return false
		}
	}

	say("log from the app")
	var code string
	until(t, "the approval prompt", func() bool { code = codeIn(texts()); return code != "" })
	if got := ledger.appended(); len(got) != 0 {
		t.Fatalf("the tool ran before approval: %q", got)
	}
	say("/approve " + code)
	until(t, "the model's answer after approval", has("done: appended line 1"))
	if got := ledger.appended(); len(got) != 1 || got[0] != "from the app" {
		t.Fatalf("the ledger holds %q", got)
	}

	n := len(texts())
	say("log never")
	until(t, "the second prompt", func() bool { code = codeIn(texts()[n:]); return code != "" })
	say("/deny " + code)
	until(t, "the model's answer after the denial", has("done: denied by zhangsan"))
	if got := ledger.appended(); len(got) != 1 {
		t.Errorf("the ledger holds %q after a denial", got)
	}
	for _, m := range fake.Messages() {
		if m.ToUser != "zhangsan" {
			t.Errorf("a message to %q", m.ToUser)
		}
	}
}

// TestApprovalOnOfficialAccount: on an Official Account the prompt is a
// text with a code (the passive reply); /approve runs the call once and
// the model's answer follows as a customer-service message.
func TestApprovalOnOfficialAccount(t *testing.T) {
	t.Parallel()
	const (
		appID, secret, token, key = "wx-approve-account", "approve-oa-secret", "approveOAToken", "approveOAAESKey0123456789abcdefghijklmnopqr"
	)
	r := redistest.New(t)
	ledger, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	fake := wechattest.NewOfficialAccount(t, appID, secret)
	ch, err := officialaccount.New(officialaccount.Config{AppID: appID, AppSecret: config.Secret(secret), Token: config.Secret(token),
		EncodingAESKey: config.Secret(key), BaseURL: fake.URL()},
		officialaccount.Options{Redis: r.Client, Prefix: r.Prefix, API: wxapi.ClientOptions{HTTP: wechattest.ReplicaClient("A"), RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond}},
		metrics.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newApprovalReplicaWith(t, r, mcpURL, model, ch, time.Hour, time.Hour, officialaccount.Name)
	srv := serveChannel(t, a, ch)
	platform := wechattest.NewPlatform(t, token, key, appID)
	var passive []string
	msgID := 660000
	say := func(text string) {
		t.Helper()
		msgID++
		ans := wechattest.Post(t, srv.URL+officialaccount.Path, platform.Encrypted(t, wechattest.Inbound{
			To: "gh_approve", From: "o-alice", Content: text, MsgID: strconv.Itoa(msgID)}, true))
		if ans.Status != http.StatusOK {
			t.Fatalf("callback %q answered %d %s", text, ans.Status, ans.Body)
		}
		if reply, ok := platform.Reply(t, ans); ok {
			passive = append(passive, reply.Content)
		}
	}
	texts := func() []string {
		out := append([]string(nil), passive...)
		for _, m := range fake.CustomMessages() {
			out = append(out, m.Text.Content)
		}
		return out
	}

	say("log from the account")
	var code string
	until(t, "the approval prompt", func() bool { code = codeIn(texts()); return code != "" })
	if got := ledger.appended(); len(got) != 0 {
		t.Fatalf("the tool ran before approval: %q", got)
	}
	say("/approve " + code)
	until(t, "the model's answer after approval", func() bool {
		for _, s := range texts() {
			if s == "done: appended line 1" {
				return true
			}
		}
		return false
	})
	if got := ledger.appended(); len(got) != 1 || got[0] != "from the account" {
		t.Errorf("the ledger holds %q", got)
	}
}

// TestApprovalOutcomesArePrimed: the outcomes primed at zero are exactly
// the states a decided approval is counted under.
func TestApprovalOutcomesArePrimed(t *testing.T) {
	t.Parallel()
	want := []string{approval.Approved, approval.Denied, approval.Expired, approval.Cancelled}
	if !slices.Equal(metrics.ApprovalOutcomes, want) {
		t.Errorf("primed outcomes %q; the gateway counts %q", metrics.ApprovalOutcomes, want)
	}
}
