package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/feishu"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/gateway/approval"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

const (
	feishuToken = "approve-vtoken"
	feishuKey   = "approve-encrypt-key"
)

// cardReplica is one replica with a Feishu adapter behind its own HTTP
// server, on the test's Redis and the fake Open API.
type cardReplica struct {
	*approvalReplica
	srv *httptest.Server
}

func newCardReplica(t *testing.T, r *redistest.Redis, api *feishutest.Server, mcpURL string, model *openaitest.Server, timeout, sweep time.Duration) *cardReplica {
	t.Helper()
	ch, err := feishu.New(feishu.Config{AppID: "cli_approve", AppSecret: "secret", VerificationToken: feishuToken, EncryptKey: feishuKey,
		BaseURL: api.URL, Mode: feishu.ModeWebhook, ReplyInThread: true, FollowThreads: true},
		feishu.Options{Redis: r.Client, Prefix: r.Prefix, RetryBase: 10 * time.Millisecond, ChatInterval: time.Millisecond}, metrics.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newApprovalReplicaWith(t, r, mcpURL, model, ch, timeout, sweep, feishu.Name)
	mux := http.NewServeMux()
	ch.Mount(mux)
	srv := httptest.NewServer(mux)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ch.Run(ctx, a.gw) }()
	t.Cleanup(func() { srv.Close(); cancel(); <-done })
	return &cardReplica{approvalReplica: a, srv: srv}
}

// post delivers a callback body, encrypted and signed as Feishu does.
func (fr *cardReplica) post(t *testing.T, event []byte) (int, string) {
	t.Helper()
	body := feishutest.Encrypted(event, feishuKey)
	resp, err := http.DefaultClient.Do(feishutest.Request(fr.srv.URL+feishu.EventsPath, body, feishuKey, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// click delivers a click and reads Feishu's answer to it.
func (fr *cardReplica) click(t *testing.T, c feishutest.CardAction) feishutest.ClickAnswer {
	t.Helper()
	status, body := fr.post(t, feishutest.Click(c))
	if status != http.StatusOK {
		t.Fatalf("click answered %d %q", status, body)
	}
	var a feishutest.ClickAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("click answered %q: %v", body, err)
	}
	return a
}

// ask is a group mention of the bot by ou_alice.
func askFeishu(id, text string) []byte {
	return feishutest.Event(feishutest.Message{MessageID: id, ChatID: "oc_approve", ChatType: "group", Sender: "ou_alice", Token: feishuToken,
		Content: feishutest.Text("@_user_1 " + text), Mentions: []feishutest.Mention{{Key: "@_user_1", OpenID: feishutest.BotOpenID, Name: "Parley"}}})
}

// approvalCardSent waits for the n-th approval card (from 1) the fake received.
func approvalCardSent(t *testing.T, api *feishutest.Server, n int) feishutest.Sent {
	t.Helper()
	var card feishutest.Sent
	until(t, "an approval card", func() bool {
		seen := 0
		for _, s := range api.Sent() {
			if len(feishutest.Buttons(s.Content)) == 2 {
				if seen++; seen == n {
					card = s
					return true
				}
			}
		}
		return false
	})
	return card
}

// cardClick is user's click on the card's button for decision.
func cardClick(card feishutest.Sent, user, decision string) feishutest.CardAction {
	for _, b := range feishutest.Buttons(card.Content) {
		if b.Value["decision"] == decision {
			return feishutest.CardAction{Token: feishuToken, Operator: user, MessageID: card.MessageID, ChatID: "oc_approve", Value: b.Value}
		}
	}
	return feishutest.CardAction{}
}

func sentText(api *feishutest.Server, want string) func() bool {
	return func() bool {
		for _, s := range api.Sent() {
			if s.Text == want {
				return true
			}
		}
		return false
	}
}

// TestApprovalByFeishuCard: a write tool waits behind a card; a forged
// click, a click on another conversation's approval and a non-approver's
// click change nothing; the same approving click delivered to two
// replicas at once runs the tool once — one answer redraws the card as
// approved, the other says it already was; the model's answer follows.
// A second card is denied: nothing more is written.
func TestApprovalByFeishuCard(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ledger, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	api := feishutest.New(t)
	a := newCardReplica(t, r, api, mcpURL, model, time.Hour, time.Hour)
	b := newCardReplica(t, r, api, mcpURL, model, time.Hour, time.Hour)

	if status, body := a.post(t, askFeishu("om_q1", "log from feishu")); status != http.StatusOK {
		t.Fatalf("event answered %d %q", status, body)
	}
	card := approvalCardSent(t, api, 1)
	if card.ReplyTo != "om_q1" || !strings.Contains(card.Text, "ledger__append") {
		t.Fatalf("the card %+v", card)
	}
	approve := cardClick(card, "ou_alice", "approve")

	// Forged: a bad signature is refused before anything is read.
	forged := feishutest.Request(b.srv.URL+feishu.EventsPath, feishutest.Encrypted(feishutest.Click(approve), feishuKey), feishuKey, time.Now())
	forged.Header.Set(feishu.HeaderSignature, strings.Repeat("a", 64))
	resp, err := http.DefaultClient.Do(forged)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a forged click answered %d", resp.StatusCode)
	}
	// Another conversation's thread, an unknown approval: nothing pending there.
	elsewhere := approve
	elsewhere.Value = map[string]string{"parley_approval": approve.Value["parley_approval"], "decision": "approve", "chat": "oc_approve", "thread": "om_other"}
	unknown := approve
	unknown.Value = map[string]string{"parley_approval": "NOSUCHAPPROVAL", "decision": "approve", "chat": "oc_approve", "thread": "om_q1"}
	for _, c := range []feishutest.CardAction{elsewhere, unknown} {
		if ans := b.click(t, c); ans.Card != nil || ans.ToastText() != "There is no pending approval with that code." {
			t.Errorf("a click on what is not pending: %+v", ans)
		}
	}
	// A non-approver: a toast for them, the card as it is.
	if ans := b.click(t, cardClick(card, "ou_mallory", "approve")); ans.Card != nil || ans.ToastText() != "You can't approve this." {
		t.Errorf("a non-approver's click: %+v", ans)
	}
	if got := ledger.appended(); len(got) != 0 {
		t.Fatalf("the tool ran before approval: %q", got)
	}

	// The same click on both replicas at once (a double delivery).
	approve.EventID = "ev_click_twice"
	answers := make([]feishutest.ClickAnswer, 2)
	var wg sync.WaitGroup
	for i, rp := range []*cardReplica{a, b} {
		wg.Go(func() { answers[i] = rp.click(t, approve) })
	}
	wg.Wait()
	toasts := []string{answers[0].ToastText(), answers[1].ToastText()}
	if !(strings.HasPrefix(toasts[0], "Approved") && strings.HasPrefix(toasts[1], "Already approved") ||
		strings.HasPrefix(toasts[1], "Approved") && strings.HasPrefix(toasts[0], "Already approved")) {
		t.Errorf("toasts %q: want one approval and one 'already'", toasts)
	}
	for _, ans := range answers {
		if txt := ans.CardText(); !strings.Contains(txt, "Approved by <at id=ou_alice></at>") || strings.Contains(string(ans.Card.Data), `"button"`) {
			t.Errorf("the redrawn card: %q", txt)
		}
	}
	until(t, "the model's answer after approval", sentText(api, "done: appended line 1"))
	// A late double click: already approved, still nothing more runs.
	late := b.click(t, approve)
	if got := ledger.appended(); len(got) != 1 || got[0] != "from feishu" {
		t.Fatalf("the ledger holds %q; want the line once", got)
	}
	if !strings.HasPrefix(late.ToastText(), "Already approved") {
		t.Errorf("a late click: %+v; want it told the approval was already given", late)
	}
	if n := testutil.ToFloat64(a.metrics.ToolApprovals.WithLabelValues(feishu.Name, "ledger__append", approval.Approved)) +
		testutil.ToFloat64(b.metrics.ToolApprovals.WithLabelValues(feishu.Name, "ledger__append", approval.Approved)); n != 1 {
		t.Errorf("%v approvals counted", n)
	}

	// Deny: the model hears who denied it; nothing is written.
	if status, _ := b.post(t, askFeishu("om_q2", "log never")); status != http.StatusOK {
		t.Fatal("second event refused")
	}
	second := approvalCardSent(t, api, 2)
	if ans := a.click(t, cardClick(second, "ou_alice", "deny")); !strings.Contains(ans.CardText(), "Denied by") {
		t.Errorf("the denied card: %q", ans.CardText())
	}
	until(t, "the model's answer after the denial", sentText(api, "done: denied by ou_alice"))
	if got := ledger.appended(); len(got) != 1 {
		t.Errorf("the ledger holds %q after a denial", got)
	}
}

// TestFeishuCardApprovalOutlivesItsReplica: the replica that paused the
// turn and sent the card is gone; the click on the other replica resumes
// the turn there and the tool runs once.
func TestFeishuCardApprovalOutlivesItsReplica(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ledger, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	api := feishutest.New(t)
	a := newCardReplica(t, r, api, mcpURL, model, time.Hour, time.Hour)
	b := newCardReplica(t, r, api, mcpURL, model, time.Hour, time.Hour)
	if status, _ := a.post(t, askFeishu("om_q1", "log survives")); status != http.StatusOK {
		t.Fatal("event refused")
	}
	card := approvalCardSent(t, api, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.gw.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	a.srv.Close()
	if ans := b.click(t, cardClick(card, "ou_alice", "approve")); !strings.Contains(ans.CardText(), "Approved by") {
		t.Errorf("the redrawn card: %q", ans.CardText())
	}
	until(t, "the model's answer on the other replica", sentText(api, "done: appended line 1"))
	if got := ledger.appended(); len(got) != 1 || got[0] != "survives" {
		t.Errorf("the ledger holds %q", got)
	}
}

// TestFeishuCardApprovalExpires: nobody clicks; the card is redrawn as
// expired, without buttons, and the model hears it expired; a click after
// that changes nothing.
func TestFeishuCardApprovalExpires(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ledger, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	api := feishutest.New(t)
	a := newCardReplica(t, r, api, mcpURL, model, 500*time.Millisecond, 50*time.Millisecond)
	if status, _ := a.post(t, askFeishu("om_q1", "log too late")); status != http.StatusOK {
		t.Fatal("event refused")
	}
	card := approvalCardSent(t, api, 1)
	until(t, "the model's answer after the expiry", sentText(api, "done: approval expired"))
	until(t, "the card redrawn as expired", func() bool {
		for _, u := range api.Updates() {
			if u.MessageID == card.MessageID && strings.Contains(u.Text, "Approval expired") {
				return true
			}
		}
		return false
	})
	if ans := a.click(t, cardClick(card, "ou_alice", "approve")); ans.Toast == nil || strings.HasPrefix(ans.ToastText(), "Approved") {
		t.Errorf("a click after the expiry: %+v", ans)
	}
	if got := ledger.appended(); len(got) != 0 {
		t.Errorf("the tool ran: %q", got)
	}
}
