package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	openai "github.com/sashabaranov/go-openai"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/mcp"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/console"
	"github.com/parleyhq/parley/channels/wechat"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/gateway/approval"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
)

// approvalModel asks for the MCP write tool on "log LINE" and, once it
// has the tool's result, says what came of it; anything else is echoed.
func approvalModel(req openai.ChatCompletionRequest) openaitest.Step {
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last.Role == "tool":
		for _, s := range []string{"appended line", "denied by", "approval expired"} {
			if i := strings.Index(last.Content, s); i >= 0 {
				rest := last.Content[i:]
				if end := strings.IndexAny(rest, ".:(\n<"); end >= 0 {
					rest = rest[:end]
				}
				return openaitest.Text("done: " + strings.TrimSpace(rest))
			}
		}
		return openaitest.Text("done: something else")
	case strings.HasPrefix(last.Content, "log "):
		return openaitest.Tools(openaitest.Call("ledger__append", fmt.Sprintf(`{"line":%q}`, strings.TrimPrefix(last.Content, "log "))))
	}
	return openaitest.Text("echo: " + last.Content)
}

type approvalReplica struct {
	gw      *gateway.Gateway
	metrics *metrics.Metrics
}

// newApprovalReplica is a replica whose write tools wait for approval on
// Slack (admins: UADMIN), sending its replies to ch, on r's Redis.
func newApprovalReplica(t *testing.T, r *redistest.Redis, mcpURL string, model *openaitest.Server, ch channels.Channel, timeout, sweep time.Duration) *approvalReplica {
	t.Helper()
	return newApprovalReplicaWith(t, r, mcpURL, model, ch, timeout, sweep, "slack")
}

// newApprovalReplicaWith is newApprovalReplica with the approval policy on
// platform (and the console), write tools allowed there.
func newApprovalReplicaWith(t *testing.T, r *redistest.Redis, mcpURL string, model *openaitest.Server, ch channels.Channel, timeout, sweep time.Duration, platform string, tune ...func(*gateway.Config, *agent.Config)) *approvalReplica {
	t.Helper()
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Second})
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tools := agent.NewRegistry()
	mgr, err := mcp.New(mcp.Config{Servers: map[string]mcp.ServerConfig{"ledger": {URL: mcpURL}}}, mcp.Options{Registry: tools})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })
	level := config.Level{Tools: config.ToolRules{ApproveWrites: new(true), Write: new(true)}, Admins: []string{"UADMIN"}, ApprovalTimeout: &timeout}
	own := level
	if platform == "slack" {
		// USTRANGER is kept out by the access rules.
		own.Access.Users = []string{"U1", "U2", "UADMIN"}
	}
	pol := policy.New(policy.Config{Platforms: map[string]policy.PlatformPolicy{platform: {Level: own}, "console": {Level: level}}})
	acfg := agent.Config{Model: "test", Timeout: 10 * time.Second}
	gcfg := gateway.Config{Tools: tools, Policy: pol, SweepEvery: sweep, Approvals: approval.New(r.Client, store.Key)}
	for _, f := range tune {
		f(&gcfg, &acfg)
	}
	a := agent.New(acfg, agent.NewClient(model.URL(), "sk", nil), tools, m, log)
	gw := gateway.New(gcfg, store, a, m, log)
	gw.Register(ch)
	gw.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		gw.Shutdown(ctx)
	})
	return &approvalReplica{gw: gw, metrics: m}
}

// from is a message of the test's conversation from user.
func from(user, id, text string) channels.Message {
	return channels.Message{ID: id, Channel: "slack", Workspace: "T1", Chat: "C1", Thread: "t1", User: user, Text: text}
}

func submit(t *testing.T, gw *gateway.Gateway, m channels.Message) {
	t.Helper()
	if err := gw.Submit(context.Background(), m); err != nil {
		t.Fatalf("Submit(%q) = %v", m.Text, err)
	}
}

// waitFor returns the index of the first reply from the start-th on that
// satisfies ok, waiting for it.
func (r *recorder) waitFor(t *testing.T, start int, what string, ok func(channels.Reply) bool) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r.mu.Lock()
		for i := start; i < len(r.got); i++ {
			if ok(r.got[i].reply) {
				r.mu.Unlock()
				return i
			}
		}
		n := len(r.got)
		r.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no reply %s among %d: %+v", what, n, r.texts())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *recorder) at(i int) channels.Reply {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[i].reply
}

// texts is the text of every reply so far.
func (r *recorder) texts() []string {
	var out []string
	for _, s := range r.snapshot() {
		out = append(out, s.reply.Text)
	}
	return out
}

func textIs(want string) func(channels.Reply) bool {
	return func(r channels.Reply) bool { return r.Text == want }
}

func textHas(want string) func(channels.Reply) bool {
	return func(r channels.Reply) bool { return strings.Contains(r.Text, want) }
}

func isPrompt(r channels.Reply) bool { return r.Approval != nil }

// TestApprovalRunsTheToolOnceAcrossReplicas: a write tool waits for
// approval; a wrong code and a non-approver change nothing; two approvers
// on two replicas at once — one approves, the other hears who did; the
// tool runs once, the model's answer follows, and a message sent while the
// approval was pending is answered after it.
func TestApprovalRunsTheToolOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ledger, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	ch := newRecorder("slack")
	a := newApprovalReplica(t, r, mcpURL, model, ch, time.Hour, time.Hour)
	b := newApprovalReplica(t, r, mcpURL, model, ch, time.Hour, time.Hour)

	submit(t, a.gw, from("U1", "E1", "log deployed v2"))
	p := ch.waitFor(t, 0, "with an approval prompt", isPrompt)
	prompt := ch.texts()[p]
	code := ch.at(p).Approval.Code
	for _, want := range []string{"ledger__append", `"line": "deployed v2"`, "/approve " + code, "/deny " + code, "expires in 1 hour"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt %q lacks %q", prompt, want)
		}
	}
	if got := ledger.appended(); len(got) != 0 {
		t.Fatalf("the tool ran before approval: %q", got)
	}

	submit(t, a.gw, from("U1", "E2", "after")) // queued behind the approval
	submit(t, b.gw, from("U1", "E3", "/approve WRONG1"))
	ch.waitFor(t, p, "refusing a wrong code", textIs("There is no pending approval with that code."))
	submit(t, a.gw, from("USTRANGER", "E3b", "/approve "+code))
	submit(t, a.gw, from("U2", "E4", "/approve "+code))
	ch.waitFor(t, p, "refusing a non-approver", textIs("You can't approve this."))
	if got := ledger.appended(); len(got) != 0 {
		t.Fatalf("a refused approval ran the tool: %q", got)
	}

	var wg sync.WaitGroup
	wg.Go(func() { submit(t, a.gw, from("UADMIN", "E5", "/approve "+code)) })
	wg.Go(func() { submit(t, b.gw, from("U1", "E6", "/approve "+strings.ToLower(code))) })
	wg.Wait()
	ch.waitFor(t, p, "approving", textHas("Approved — running ledger__append."))
	ch.waitFor(t, p, "saying who approved", textHas("Already approved by U"))
	done := ch.waitFor(t, p, "with the model's answer", textIs("done: appended line 1"))
	after := ch.waitFor(t, p, "answering the message sent while pending", textIs("echo: after"))
	if after < done {
		t.Errorf("the message sent while pending was answered first: %q", ch.texts())
	}
	for _, s := range ch.snapshot() {
		if s.msg.User == "USTRANGER" {
			t.Errorf("someone the access rules keep out was answered %q", s.reply.Text)
		}
	}
	// A re-delivered approval is not a second decision.
	submit(t, a.gw, from("UADMIN", "E5", "/approve "+code))
	if got := ledger.appended(); len(got) != 1 {
		t.Errorf("the tool ran %d times: %q", len(got), got)
	}
	approved := testutil.ToFloat64(a.metrics.ToolApprovals.WithLabelValues("slack", "ledger__append", approval.Approved)) +
		testutil.ToFloat64(b.metrics.ToolApprovals.WithLabelValues("slack", "ledger__append", approval.Approved))
	if approved != 1 {
		t.Errorf("approvals counted %v, want 1", approved)
	}
}

// TestApprovalDeniedOrCancelled: a denial reaches the model as "denied by
// NAME" and the tool does not run; /cancel drops the call and the turn,
// and the conversation goes on.
func TestApprovalDeniedOrCancelled(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ledger, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	ch := newRecorder("slack")
	a := newApprovalReplica(t, r, mcpURL, model, ch, time.Hour, time.Hour)

	long := strings.Repeat("y", 700)
	submit(t, a.gw, from("U1", "E1", "log "+long))
	p := ch.waitFor(t, 0, "with a prompt", isPrompt)
	code := ch.at(p).Approval.Code
	if prompt := ch.at(p).Text; strings.Contains(prompt, long) || !strings.Contains(prompt, "/show "+code) {
		t.Errorf("long arguments were not cut with a way to see them: %q", prompt)
	}
	submit(t, a.gw, from("U1", "E1b", "/show "+code))
	ch.waitFor(t, p, "with the arguments in full", textHas(long))
	submit(t, a.gw, from("UADMIN", "E2", "/deny "+code))
	ch.waitFor(t, p, "denying", textIs("Denied — ledger__append will not run."))
	ch.waitFor(t, p, "with the model's answer", textIs("done: denied by UADMIN"))

	submit(t, a.gw, from("U1", "E3", "log two"))
	p = ch.waitFor(t, p+1, "with a second prompt", isPrompt)
	submit(t, a.gw, from("U1", "E4", "/cancel"))
	c := ch.waitFor(t, p, "cancelling", textIs("Cancelled — ledger__append will not run."))
	submit(t, a.gw, from("U1", "E5", "hello"))
	ch.waitFor(t, c, "going on", textIs("echo: hello"))
	if got := ledger.appended(); len(got) != 0 {
		t.Errorf("the tool ran: %q", got)
	}
	if n := testutil.ToFloat64(a.metrics.ToolApprovals.WithLabelValues("slack", "ledger__append", approval.Cancelled)); n != 1 {
		t.Errorf("cancellations counted %v", n)
	}
	submit(t, a.gw, from("U1", "E6", "/cancel"))
	ch.waitFor(t, c, "with nothing to cancel", textIs("There is nothing waiting for approval here."))
}

// TestApprovalExpires: nobody decides; when the approval's time is up the
// model hears that it expired and answers, and a late approval changes
// nothing.
func TestApprovalExpires(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ledger, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	ch := newRecorder("slack")
	a := newApprovalReplica(t, r, mcpURL, model, ch, 500*time.Millisecond, time.Hour)

	submit(t, a.gw, from("U1", "E1", "log one"))
	p := ch.waitFor(t, 0, "with a prompt", isPrompt)
	code := ch.at(p).Approval.Code
	ch.waitFor(t, p, "with the model's answer", textIs("done: approval expired"))
	submit(t, a.gw, from("U1", "E2", "/approve "+code))
	ch.waitFor(t, p, "refusing the late approval", textIs("That approval has expired."))
	if got := ledger.appended(); len(got) != 0 {
		t.Errorf("the tool ran: %q", got)
	}
	if n := testutil.ToFloat64(a.metrics.ToolApprovals.WithLabelValues("slack", "ledger__append", approval.Expired)); n != 1 {
		t.Errorf("expiries counted %v", n)
	}
}

// TestApprovalOutlivesTheReplicaThatPaused: the replica that paused the
// turn is stopped while the prompt is pending; approving on the other
// replica resumes the turn there and runs the tool once.
func TestApprovalOutlivesTheReplicaThatPaused(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ledger, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	ch := newRecorder("slack")
	a := newApprovalReplica(t, r, mcpURL, model, ch, time.Hour, time.Hour)
	submit(t, a.gw, from("U1", "E1", "log survived"))
	p := ch.waitFor(t, 0, "with a prompt", isPrompt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.gw.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	b := newApprovalReplica(t, r, mcpURL, model, ch, time.Hour, 50*time.Millisecond)
	submit(t, b.gw, from("U1", "E2", "/approve "+ch.at(p).Approval.Code))
	ch.waitFor(t, p, "with the model's answer", textIs("done: appended line 1"))
	if got := ledger.appended(); len(got) != 1 || got[0] != "survived" {
		t.Errorf("the ledger holds %q", got)
	}
}

// TestApprovalOnTheConsole: the console waits for one answer to each
// message; the call's prompt answers the message, and the model's answer
// after the call answers the /approve.
func TestApprovalOnTheConsole(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ledger, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	con := console.New("approvals", "alice", console.Options{})
	a := newApprovalReplica(t, r, mcpURL, model, con, time.Hour, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prompt, err := con.Ask(ctx, a.gw, "log from the console")
	if err != nil {
		t.Fatal(err)
	}
	if prompt.Approval == nil || !strings.Contains(prompt.Text, "/approve "+prompt.Approval.Code) {
		t.Fatalf("the console got %+v; want the approval prompt", prompt)
	}
	other, err := con.Ask(ctx, a.gw, "/approve ZZZZZZ")
	if err != nil || other.Text != "There is no pending approval with that code." {
		t.Fatalf("a wrong code: %+v %v", other, err)
	}
	answer, err := con.Ask(ctx, a.gw, "/approve "+prompt.Approval.Code)
	if err != nil {
		t.Fatal(err)
	}
	if answer.Text != "done: appended line 1" {
		t.Fatalf("/approve was answered %q; want the model's answer", answer.Text)
	}
	if got := ledger.appended(); len(got) != 1 || got[0] != "from the console" {
		t.Errorf("the ledger holds %q", got)
	}
}

// TestApprovalOnWeChat: on WeChat (iLink, a fake of its API) the prompt is
// a text with a code, and /approve from the requester runs the call; the
// model's answer follows in the chat.
func TestApprovalOnWeChat(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ledger, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	f := wechattest.NewILink(t)
	f.SetLongPoll(200)
	st := wechat.NewRedisState(r.Client, r.Prefix)
	if err := st.SaveAccount(context.Background(), wechat.Account{BotID: f.BotID, Token: f.Token(), BaseURL: f.URL(), LoggedIn: time.Now()}); err != nil {
		t.Fatal(err)
	}
	ch, err := wechat.New(wechat.Config{}, wechat.Options{
		State: st, Client: r.Client, Prefix: r.Prefix, HTTP: wechattest.ReplicaClient("A"),
		RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
	}, metrics.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// WeChat's builtin level drops write tools; this bot offers them, behind approval.
	a := newApprovalReplicaWith(t, r, mcpURL, model, ch, time.Hour, time.Hour, "wechat")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ch.Run(ctx, a.gw) }()
	t.Cleanup(func() { cancel(); <-done })

	f.Add(wechattest.Message{ID: 1, From: "alice@im.wechat", Text: "log from wechat", ContextToken: "ctx-1"})
	var code string
	until(t, "the approval prompt", func() bool {
		for _, s := range f.Sends() {
			if i := strings.Index(s.Text, "/approve "); i >= 0 && len(s.Text) >= i+15 {
				code = s.Text[i+9 : i+15]
				return true
			}
		}
		return false
	})
	if got := ledger.appended(); len(got) != 0 {
		t.Fatalf("the tool ran before approval: %q", got)
	}
	f.Add(wechattest.Message{ID: 2, From: "alice@im.wechat", Text: "/approve " + code, ContextToken: "ctx-2"})
	until(t, "the model's answer after approval", func() bool {
		for _, s := range f.Sends() {
			if s.Text == "done: appended line 1" {
				return true
			}
		}
		return false
	})
	if got := ledger.appended(); len(got) != 1 || got[0] != "from wechat" {
		t.Errorf("the ledger holds %q", got)
	}
}

// TestApprovalExpiresOnAnotherReplica: the replica that paused the turn is
// gone and nobody decides; another replica's sweep finds the conversation
// when the approval's time is up and the model hears that it expired.
func TestApprovalExpiresOnAnotherReplica(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ledger, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	ch := newRecorder("slack")
	a := newApprovalReplica(t, r, mcpURL, model, ch, 500*time.Millisecond, time.Hour)
	submit(t, a.gw, from("U1", "E1", "log never"))
	p := ch.waitFor(t, 0, "with a prompt", isPrompt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.gw.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	b := newApprovalReplica(t, r, mcpURL, model, ch, 500*time.Millisecond, 50*time.Millisecond)
	ch.waitFor(t, p, "with the model's answer", textIs("done: approval expired"))
	if got := ledger.appended(); len(got) != 0 {
		t.Errorf("the tool ran: %q", got)
	}
	if n := testutil.ToFloat64(b.metrics.ToolApprovals.WithLabelValues("slack", "ledger__append", approval.Expired)); n != 1 {
		t.Errorf("B counted %v expiries", n)
	}
}
