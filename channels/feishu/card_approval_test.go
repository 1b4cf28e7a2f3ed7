package feishu

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
)

// deciding stands in for the gateway's approval commands: "/approve ID"
// or "/deny ID" from an approver in the approval's conversation decides
// it once (answered through Send at once, as the gateway does in Submit);
// anyone else, or another conversation, is refused.
type deciding struct {
	ch        *Adapter
	id, conv  string
	approvers map[string]bool

	mu      sync.Mutex
	state   string
	by      string
	msgs    []channels.Message
	prompts map[string]string
}

func (d *deciding) Submit(ctx context.Context, m channels.Message) error {
	d.mu.Lock()
	d.msgs = append(d.msgs, m)
	verb, id, _ := strings.Cut(m.Text, " ")
	var r channels.Reply
	switch {
	case id != d.id || m.ConversationKey() != d.conv:
		r = channels.Reply{Notice: true, Text: "There is no pending approval with that code.", Decided: &channels.ApprovalDecision{Outcome: channels.DecisionUnknown}}
	case !d.approvers[m.User]:
		r = channels.Reply{Notice: true, Text: "You can't approve this.", Decided: &channels.ApprovalDecision{ID: d.id, Outcome: channels.DecisionNotAllowed}}
	default:
		already := d.state != ""
		if !already {
			d.state, d.by = map[string]string{"/approve": channels.DecisionApproved, "/deny": channels.DecisionDenied}[verb], m.User
		}
		text := "Approved — running ledger__append."
		if already {
			text = "Already " + d.state + " by " + d.by + "."
		}
		r = channels.Reply{Notice: true, Text: text, Decided: &channels.ApprovalDecision{ID: d.id, Code: "ABC123", Tool: "ledger__append",
			Args: hostileArgs, Outcome: d.state, Already: already, By: d.by, At: time.Date(2026, 11, 30, 20, 50, 0, 0, time.UTC), Prompt: d.prompts}}
	}
	d.mu.Unlock()
	return d.ch.Send(ctx, m, r)
}

func (d *deciding) messages() []channels.Message {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]channels.Message(nil), d.msgs...)
}

// groupMessage is the mention in a group thread that led to the prompt.
func groupMessage() channels.Message {
	return channels.Message{ID: "om_ask", Channel: Name, Workspace: "tenant1", Chat: "oc_group", Thread: "om_ask", User: "ou_alice",
		Meta: map[string]string{MetaMessageID: "om_ask", MetaChatType: "group", MetaThreadKey: "oc_group:om_ask", MetaInThread: "1"}}
}

const hostileArgs = "{\n  \"line\": \"‹at user_id=\\\"all\\\"›‹/at› [click](https://evil.example) **bold**\"\n}"

func prompt() channels.Reply {
	return channels.Reply{Notice: true, Text: "Approval needed … /approve ABC123", Approval: &channels.Approval{
		ID: "APR1", Code: "ABC123", Tool: "ledger__append", Args: hostileArgs, Expires: time.Date(2026, 11, 30, 21, 0, 0, 0, time.UTC)}}
}

// sendPrompt posts the prompt card and wires the deciding gateway to it.
func sendPrompt(t *testing.T, f *fixture) (*deciding, feishutest.Sent) {
	t.Helper()
	m := groupMessage()
	ref, err := f.ch.SendPrompt(context.Background(), m, prompt())
	if err != nil {
		t.Fatal(err)
	}
	sent := f.api.Sent()
	if len(sent) != 1 || sent[0].MsgType != "interactive" {
		t.Fatalf("sent %+v", sent)
	}
	if ref[refMessageID] != sent[0].MessageID {
		t.Fatalf("reference %v for the card %s", ref, sent[0].MessageID)
	}
	d := &deciding{ch: f.ch, id: "APR1", conv: m.ConversationKey(), approvers: map[string]bool{"ou_alice": true, "ou_admin": true}, prompts: ref}
	f.ch.mu.Lock()
	f.ch.handler = d
	f.ch.mu.Unlock()
	return d, sent[0]
}

func clickOn(card feishutest.Sent, user, decision string) feishutest.CardAction {
	var v map[string]string
	for _, b := range feishutest.Buttons(card.Content) {
		if b.Value[valueDecision] == decision {
			v = b.Value
		}
	}
	return feishutest.CardAction{Token: testToken, Operator: user, MessageID: card.MessageID, ChatID: "oc_group", Value: v}
}

// click delivers c over the HTTP callback and reads Feishu's answer.
func (f *fixture) click(t *testing.T, c feishutest.CardAction) feishutest.ClickAnswer {
	t.Helper()
	status, body := f.post(t, feishutest.Click(c))
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var a feishutest.ClickAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return a
}

// TestApprovalCardShowsTheCallAsTyped: the prompt is a card replying in
// the thread, arguments in plain_text (no <at>, link or markup can come of
// them), Approve and Deny buttons carrying the approval and its chat.
func TestApprovalCardShowsTheCallAsTyped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	_, card := sendPrompt(t, f)
	if card.Kind != "reply" || card.ReplyTo != "om_ask" || !card.ReplyInThread {
		t.Errorf("card sent as %+v", card)
	}
	var parsed struct {
		Config   map[string]any   `json:"config"`
		Elements []map[string]any `json:"elements"`
	}
	if err := json.Unmarshal([]byte(card.Content), &parsed); err != nil {
		t.Fatal(err)
	}
	if parsed.Config["update_multi"] != true {
		t.Error("the card is not shared: a redraw would reach only one person")
	}
	for _, e := range parsed.Elements {
		raw, _ := json.Marshal(e)
		if strings.Contains(string(raw), "evil.example") && !strings.Contains(string(raw), `"tag":"plain_text"`) {
			t.Errorf("arguments outside plain_text: %s", raw)
		}
		if e["tag"] == "markdown" {
			t.Errorf("a markdown element: %s", raw)
		}
	}
	if !strings.Contains(card.Text, "ledger__append") || !strings.Contains(card.Text, "evil.example") || !strings.Contains(card.Text, "ABC123") {
		t.Errorf("the card shows %q", card.Text)
	}
	buttons := feishutest.Buttons(card.Content)
	if len(buttons) != 2 || buttons[0].Text != "Approve" || buttons[1].Text != "Deny" {
		t.Fatalf("buttons %+v", buttons)
	}
	for _, b := range buttons {
		if b.Value[valueApproval] != "APR1" || b.Value[valueChat] != "oc_group" || b.Value[valueThread] != "om_ask" {
			t.Errorf("button value %v", b.Value)
		}
	}
}

// TestApprovalCardRefusedFallsBackToText: a card Feishu refuses is sent as
// the prompt's text, with no reference to redraw.
func TestApprovalCardRefusedFallsBackToText(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.api.RefuseCards(true)
	ref, err := f.ch.SendPrompt(context.Background(), groupMessage(), prompt())
	if err != nil || ref != nil {
		t.Fatalf("SendPrompt = %v, %v", ref, err)
	}
	sent := f.api.Sent()
	if len(sent) != 1 || sent[0].MsgType != "text" || !strings.Contains(sent[0].Text, "/approve ABC123") {
		t.Fatalf("sent %+v", sent)
	}
}

// TestCardClickOverHTTP: an approver's click (encrypted, signed) becomes
// "/approve ID" from them in the card's conversation; the answer redraws
// the card with who decided and when, buttons gone, and toasts. A second
// click hears it was already decided.
func TestCardClickOverHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	d, card := sendPrompt(t, f)
	a := f.click(t, clickOn(card, "ou_admin", decisionApprove))
	msgs := d.messages()
	if len(msgs) != 1 {
		t.Fatalf("submitted %+v", msgs)
	}
	m := msgs[0]
	if m.Text != "/approve APR1" || m.User != "ou_admin" || m.ConversationKey() != groupMessage().ConversationKey() || m.ID != "" {
		t.Errorf("the click became %+v", m)
	}
	if a.Card == nil || !strings.Contains(a.CardText(), "Approved by <at id=ou_admin></at> · 2026-11-30 20:50 UTC") || !strings.Contains(a.CardText(), "evil.example") {
		t.Errorf("card after the click: %q", a.CardText())
	}
	if strings.Contains(string(a.Card.Data), `"button"`) {
		t.Errorf("the redrawn card keeps its buttons: %s", a.Card.Data)
	}
	if a.Toast == nil || a.Toast.Type != "success" || a.ToastText() != "Approved — running ledger__append." {
		t.Errorf("toast %+v", a.Toast)
	}
	again := f.click(t, clickOn(card, "ou_alice", decisionDeny))
	if again.ToastText() != "Already approved by ou_admin." || !strings.Contains(again.CardText(), "Approved by") {
		t.Errorf("second click: %q / %q", again.ToastText(), again.CardText())
	}
	if len(f.api.Sent()) != 1 {
		t.Errorf("a click posted a message: %+v", f.api.Sent()[1:])
	}
}

// TestCardClickByANonApprover: a toast for the clicker, the card as it was.
func TestCardClickByANonApprover(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	_, card := sendPrompt(t, f)
	a := f.click(t, clickOn(card, "ou_mallory", decisionApprove))
	if a.Card != nil || a.ToastText() != "You can't approve this." || a.Toast.Type != "error" {
		t.Errorf("answer %+v", a)
	}
	if len(f.api.Sent()) != 1 || len(f.api.Updates()) != 0 {
		t.Errorf("sent %+v, updates %+v", f.api.Sent(), f.api.Updates())
	}
}

// TestForgedCardClicks: a click with a bad signature, without one, with a
// wrong token, for another chat, for an approval that is not pending, or
// not a button at all changes nothing and says nothing about why.
func TestForgedCardClicks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	d, card := sendPrompt(t, f)
	good := clickOn(card, "ou_admin", decisionApprove)
	enc := feishutest.Encrypted(feishutest.Click(good), testKey)

	bad := feishutest.Request(f.srv.URL+EventsPath, enc, testKey, f.now)
	bad.Header.Set(HeaderSignature, strings.Repeat("0", 64))
	unsigned := feishutest.Request(f.srv.URL+EventsPath, enc, "", f.now)
	stale := feishutest.Request(f.srv.URL+EventsPath, enc, testKey, f.now.Add(-time.Hour))
	for name, req := range map[string]*http.Request{"bad signature": bad, "unsigned": unsigned, "stale": stale} {
		if status, body := f.do(t, req); status != http.StatusUnauthorized || strings.TrimSpace(body) != refusedBody {
			t.Errorf("%s: %d %q", name, status, body)
		}
	}
	wrongToken := good
	wrongToken.Token = "guess"
	if status, body := f.post(t, feishutest.Click(wrongToken)); status != http.StatusUnauthorized || strings.TrimSpace(body) != refusedBody {
		t.Errorf("wrong token: %d %q", status, body)
	}
	if n := len(d.messages()); n != 0 {
		t.Fatalf("%d refused clicks reached the gateway", n)
	}

	// Verified, but not a click on this chat's prompt: nothing submitted.
	forwarded := good
	forwarded.ChatID = "oc_elsewhere"
	notButton := good
	notButton.Tag = "select_static"
	noValue := good
	noValue.Value = nil
	for name, c := range map[string]feishutest.CardAction{"forwarded": forwarded, "not a button": notButton, "no value": noValue} {
		if a := f.click(t, c); a.Card != nil || a.Toast != nil {
			t.Errorf("%s: answered %+v", name, a)
		}
	}
	if n := len(d.messages()); n != 0 {
		t.Fatalf("%d malformed clicks reached the gateway", n)
	}

	// Another approval's id, or another thread in the value: the gateway
	// finds nothing pending and says only that.
	otherID := good
	otherID.Value = map[string]string{valueApproval: "APROTHER", valueDecision: decisionApprove, valueChat: "oc_group", valueThread: "om_ask"}
	otherThread := good
	otherThread.Value = map[string]string{valueApproval: "APR1", valueDecision: decisionApprove, valueChat: "oc_group", valueThread: "om_other"}
	for name, c := range map[string]feishutest.CardAction{"other approval": otherID, "other thread": otherThread} {
		a := f.click(t, c)
		if a.Card != nil || a.ToastText() != "There is no pending approval with that code." {
			t.Errorf("%s: answered %+v", name, a)
		}
	}
	if d.state != "" || len(f.api.Updates()) != 0 || len(f.api.Sent()) != 1 {
		t.Errorf("a forged click changed something: state %q, updates %+v", d.state, f.api.Updates())
	}
}

// TestCardClickOverTheLongConnection: the same click as an event frame is
// answered in the frame's response, the card redrawn there.
func TestCardClickOverTheLongConnection(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config, o *Options) { c.Mode = "websocket" })
	d, card := sendPrompt(t, f)
	startRun(t, f, d)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := f.api.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	click := clickOn(card, "ou_alice", decisionDeny)
	click.Token = ""
	status, a, err := f.api.PushClick(ctx, feishutest.Click(click))
	if err != nil || status != http.StatusOK {
		t.Fatalf("push: %d %v", status, err)
	}
	if !strings.Contains(a.CardText(), "Denied by <at id=ou_alice></at>") || a.ToastText() == "" {
		t.Errorf("answer %+v / %q", a, a.CardText())
	}
	if msgs := d.messages(); len(msgs) != 1 || msgs[0].Text != "/deny APR1" {
		t.Errorf("submitted %+v", msgs)
	}
}

// TestDecisionElsewhereRedrawsTheCard: a typed /approve is answered in
// text and the card redrawn; an expiry nobody asked about only redraws.
func TestDecisionElsewhereRedrawsTheCard(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	_, card := sendPrompt(t, f)
	ref := map[string]string{refMessageID: card.MessageID}
	typed := groupMessage()
	typed.ID, typed.Meta[MetaMessageID] = "om_typed", "om_typed"
	err := f.ch.Send(context.Background(), typed, channels.Reply{Notice: true, Text: "Approved — running ledger__append.", Decided: &channels.ApprovalDecision{
		ID: "APR1", Tool: "ledger__append", Outcome: channels.DecisionApproved, By: "ou_admin", At: time.Now(), Prompt: ref}})
	if err != nil {
		t.Fatal(err)
	}
	if u := f.api.Updates(); len(u) != 1 || u[0].MessageID != card.MessageID || !strings.Contains(u[0].Text, "Approved by") {
		t.Fatalf("updates %+v", u)
	}
	if s := f.api.Sent(); len(s) != 2 || s[1].ReplyTo != "om_typed" {
		t.Fatalf("sent %+v", s)
	}
	err = f.ch.Send(context.Background(), groupMessage(), channels.Reply{Notice: true, Text: "That approval has expired.", Decided: &channels.ApprovalDecision{
		ID: "APR1", Tool: "ledger__append", Outcome: channels.DecisionExpired, At: time.Now(), Prompt: ref}})
	if err != nil {
		t.Fatal(err)
	}
	if u := f.api.Updates(); len(u) != 2 || !strings.Contains(u[1].Text, "Approval expired") || !strings.Contains(u[1].Text, "Nobody decided in time") {
		t.Fatalf("updates %+v", u)
	}
	if s := f.api.Sent(); len(s) != 2 {
		t.Errorf("the expiry posted a message: %+v", s[2:])
	}
}
