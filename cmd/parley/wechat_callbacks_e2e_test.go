package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/wechat/officialaccount"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/channels/wechat/wecomapp"
	"github.com/parleyhq/parley/internal/redistest"
)

// beyondThePassiveWindow answers "echo: …" like the default, but takes
// longer than an Official Account's passive window for messages
// containing "slow".
func beyondThePassiveWindow(req openai.ChatCompletionRequest) openaitest.Step {
	step := openaitest.Echo(req)
	if last := req.Messages[len(req.Messages)-1]; strings.Contains(last.Content, "slow") {
		step = step.WithDelay(officialaccount.DefaultPassiveWait + 1500*time.Millisecond)
	}
	return step
}

// Done-when of the WeCom-app and Official-Account issue: two `parley
// serve` replicas on one Redis, configured as an operator would (the app's
// secret as "${WECOM_APP_SECRET}"), each callback delivered to both: an
// encrypted WeCom app message and an Official Account safe-mode message
// each get exactly one answer through the fake platform API; a turn
// slower than the passive window answers the callback empty and goes out
// once as a customer-service message, with "typing" meanwhile. Neither
// platform offers the model a write tool.
func TestWeChatCallbacksTwoReplicasAnswerOnce(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	const (
		corp, appSecret, appToken, appKey = "ww-e2e-corp", "e2e-wecom-app-secret", "e2eAppToken", "e2eAppAESKey0123456789abcdefghijklmnopqrstu"
		oaID, oaSecret, oaToken, oaKey    = "wx-e2e-account", "e2e-oa-secret", "e2eOAToken", "e2eOAAESKey0123456789abcdefghijklmnopqrstuv"
		agentID                           = 1000002
	)
	r := redistest.New(t)
	model := openaitest.New(t, openaitest.WithResponder(beyondThePassiveWindow))
	wecom := wechattest.NewWeComApp(t, corp, appSecret, agentID)
	oa := wechattest.NewOfficialAccount(t, oaID, oaSecret)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  prefix: %q
wecom_app:
  apps:
    - {name: ops, corp_id: %s, agent_id: %d, secret: "${WECOM_APP_SECRET}",
       token: %q, encoding_aes_key: %q, base_url: %q}
wechat_oa: {app_id: %s, app_secret: %q, token: %q, encoding_aes_key: %q, base_url: %q}
`, r.Prefix, corp, agentID, appToken, appKey, wecom.URL(), oaID, oaSecret, oaToken, oaKey, oa.URL()))
	env := map[string]string{
		"PARLEY_CONFIG": cfg, "REDIS_URL": r.URL, "OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test",
		"PARLEY_HOME": t.TempDir(), "WECOM_APP_SECRET": appSecret,
	}
	replicas := []*wechatServe{startWeChatServe(t, env), startWeChatServe(t, env)}
	logs := []*syncBuffer{replicas[0].stderr, replicas[1].stderr}

	// Each callback goes to both replicas at once, as a retry through a
	// load balancer would.
	both := func(path string, req wechattest.Request) []wechattest.Answer {
		answers := make([]wechattest.Answer, len(replicas))
		var wg sync.WaitGroup
		for i, rp := range replicas {
			wg.Go(func() { answers[i] = wechattest.Post(t, rp.base+path, req) })
		}
		wg.Wait()
		return answers
	}

	// The WeCom app: acked empty by both, answered once with message/send.
	app := wechattest.NewPlatform(t, appToken, appKey, corp)
	for _, a := range both(wecomapp.PathPrefix+"ops", app.Encrypted(t, wechattest.Inbound{
		To: corp, From: "zhangsan", Content: "hello from the app", MsgID: "880001", AgentID: strconv.Itoa(agentID)}, false)) {
		if a.Status != 200 || len(a.Body) != 0 {
			t.Fatalf("WeCom callback answered %d %q", a.Status, a.Body)
		}
	}
	wechatEventually(t, "the WeCom answer", func() bool { return len(wecom.Messages()) > 0 }, logs...)

	// The Official Account, safe mode, fast: one passive reply in one of
	// the two responses, nothing through the API.
	account := wechattest.NewPlatform(t, oaToken, oaKey, oaID)
	passive := 0
	for _, a := range both(officialaccount.Path, account.Encrypted(t, wechattest.Inbound{
		To: "gh_e2e", From: "o-alice", Content: "hello from the account", MsgID: "990001"}, true)) {
		if reply, ok := account.Reply(t, a); ok {
			passive++
			if reply.Content != "echo: hello from the account" || reply.ToUserName != "o-alice" {
				t.Errorf("passive reply = %+v", reply)
			}
		}
	}

	// Slow: both responses empty once the window passes; "typing"; then
	// one customer-service message.
	for _, a := range both(officialaccount.Path, account.Encrypted(t, wechattest.Inbound{
		To: "gh_e2e", From: "o-bob", Content: "a slow question", MsgID: "990002"}, true)) {
		if reply, ok := account.Reply(t, a); ok {
			t.Fatalf("a turn slower than the passive window was answered passively: %+v", reply)
		}
	}
	wechatEventually(t, "the customer-service answer", func() bool { return len(oa.CustomMessages()) > 0 }, logs...)
	// Every turn has ended on both replicas: a second (wrong) answer
	// would have gone out by now.
	wechatEventually(t, "both replicas idle", func() bool {
		for _, rp := range replicas {
			if !idle(rp.base) {
				return false
			}
		}
		return true
	}, logs...)

	if msgs := wecom.Messages(); len(msgs) != 1 || msgs[0].ToUser != "zhangsan" || msgs[0].Content() != "echo: hello from the app" || msgs[0].AgentID != agentID {
		t.Errorf("WeCom answers = %+v; want exactly one", msgs)
	}
	if passive != 1 {
		t.Errorf("%d passive replies to the fast Official Account message; want exactly one", passive)
	}
	custom := oa.CustomMessages()
	if len(custom) != 1 || custom[0].ToUser != "o-bob" || custom[0].Text.Content != "echo: a slow question" {
		t.Errorf("customer-service messages = %+v; want exactly the slow answer", custom)
	}
	if ty := oa.Typings(); len(ty) == 0 || ty[0].ToUser != "o-bob" {
		t.Errorf("typing calls = %+v; want the slow turn's", ty)
	}
	if n := len(wecom.TokenCalls()) + len(oa.TokenCalls()); n != 2 {
		t.Errorf("%d token requests from two replicas; want one per account", n)
	}
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("the model answered %d requests, want 3", len(reqs))
	}
	for _, req := range reqs {
		for _, tool := range req.Tools {
			if tool.Function != nil && tool.Function.Name == "save_skill_reference" {
				t.Fatalf("a write tool was offered on wecom_app or wechat_oa: %v", req.Tools)
			}
		}
	}
}

// idle reports whether a replica runs no turn (parley_turns_in_flight 0).
func idle(base string) bool {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return strings.Contains(string(body), "\nparley_turns_in_flight 0\n")
}
