package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack/slacktest"
)

// promptThreadMsg is a message of the conversation of thread 1.0 in C1.
func promptThreadMsg() channels.Message {
	return channels.Message{Channel: Name, Workspace: slacktest.TeamID, Chat: "C1", Thread: "1700000000.000100", User: "U1",
		Meta: map[string]string{MetaTS: "1700000000.000200", MetaThreadTS: "1700000000.000100"}}
}

func promptReply() channels.Reply {
	return channels.Reply{Notice: true, Text: "Approval needed: … /approve ABC234", Approval: &channels.Approval{
		ID: "APPROVALID7", Code: "ABC234", Tool: "save_skill_reference",
		Args: "{\n  \"text\": \"‹!channel› ＠here ˋˋˋ *bold* ＆lt;\"\n}", Expires: time.Unix(1800000000, 0),
	}}
}

// postPrompt posts the prompt and returns its post and reference.
func postPrompt(t *testing.T, f *fixture) (slacktest.Post, map[string]string) {
	t.Helper()
	ref, err := f.a.SendPrompt(context.Background(), promptThreadMsg(), promptReply())
	if err != nil {
		t.Fatal(err)
	}
	posts := f.slack.Posts()
	if len(posts) != 1 {
		t.Fatalf("posts %+v", posts)
	}
	return posts[0], ref
}

// TestPromptHasButtons: the prompt is a Block Kit message in the thread
// with Approve and Deny buttons carrying the approval's id; the
// arguments stay inert (no mention, no way out of the code block); the
// reference names the posted message.
func TestPromptHasButtons(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	p, ref := postPrompt(t, f)
	if p.ThreadTS != "1700000000.000100" || p.Channel != "C1" || ref["channel"] != "C1" || ref["ts"] != p.TS {
		t.Fatalf("prompt %+v, ref %v", p, ref)
	}
	var blocks []struct {
		Type     string `json:"type"`
		BlockID  string `json:"block_id"`
		Text     struct{ Type, Text string }
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			Style    string `json:"style"`
		}
	}
	if err := json.Unmarshal([]byte(p.Blocks), &blocks); err != nil {
		t.Fatalf("blocks %q: %v", p.Blocks, err)
	}
	var buttons []string
	for _, b := range blocks {
		for _, e := range b.Elements {
			if e.ActionID != "" {
				buttons = append(buttons, e.ActionID+"="+e.Value+"/"+e.Style)
			}
		}
	}
	if strings.Join(buttons, " ") != "parley_approve=APPROVALID7/primary parley_deny=APPROVALID7/danger" {
		t.Errorf("buttons %v", buttons)
	}
	section := blocks[0].Text.Text
	if blocks[0].Text.Type != "mrkdwn" || !strings.Contains(section, "`save_skill_reference`") || strings.Count(section, "```") != 2 {
		t.Errorf("section %q", section)
	}
	if strings.Count(section, "<") != 0 || strings.Contains(section, "@") || strings.Contains(section, "&") {
		t.Errorf("the arguments are not inert: %q", section)
	}
	if text := blockText(t, p.Blocks); !strings.Contains(text, "/approve ABC234") || !strings.Contains(text, "<!date^1800000000^") {
		t.Errorf("the prompt lacks the code or the expiry: %s", text)
	}
}

// blockText is every text of blocks, a line each.
func blockText(t *testing.T, blocks string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(blocks), &v); err != nil {
		t.Fatalf("blocks %q: %v", blocks, err)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "text" {
					out = append(out, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return strings.Join(out, "\n")
}

// signedInteraction posts form to /slack/interactions, signed at at.
func (f *fixture) signedInteraction(t *testing.T, body []byte, at time.Time, secret string) int {
	t.Helper()
	req := slacktest.Signed(t, f.url+InteractionsPath, secret, at, body)
	status, _ := slacktest.Do(t, req)
	return status
}

// TestClickBecomesADecisionMessage: a signed click on Approve or Deny is
// submitted as /approve ID or /deny ID from the clicker in the prompt's
// conversation, without an id; anything else is acked and dropped;
// forged, stale or malformed requests are refused and submit nothing.
func TestClickBecomesADecisionMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if err := f.a.Identify(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, _ := postPrompt(t, f)
	ru := f.slack.ResponseURL("click1")
	click := slacktest.InteractionForm(slacktest.Click(p, "U2", "bob", ActionApprove, "APPROVALID7", ru))

	for _, c := range []struct {
		name   string
		body   []byte
		at     time.Time
		secret string
		status int
	}{
		{"bad signature", click, f.now, "not-the-secret", http.StatusUnauthorized},
		{"stale", click, f.now.Add(-10 * time.Minute), slacktest.Secret, http.StatusUnauthorized},
		{"no payload", []byte("x=1"), f.now, slacktest.Secret, http.StatusBadRequest},
		{"not json", []byte("payload=%7Bnope"), f.now, slacktest.Secret, http.StatusBadRequest},
		{"another action", slacktest.InteractionForm(slacktest.Click(p, "U2", "bob", "other_action", "APPROVALID7", ru)), f.now, slacktest.Secret, http.StatusOK},
		{"a value that is no id", slacktest.InteractionForm(slacktest.Click(p, "U2", "bob", ActionApprove, "X Y\n/reset", ru)), f.now, slacktest.Secret, http.StatusOK},
		{"another payload type", slacktest.InteractionForm(map[string]any{"type": "view_submission", "user": map[string]any{"id": "U2"}}), f.now, slacktest.Secret, http.StatusOK},
		{"the bot's own click", slacktest.InteractionForm(slacktest.Click(p, slacktest.BotUserID, "bot", ActionApprove, "APPROVALID7", ru)), f.now, slacktest.Secret, http.StatusOK},
	} {
		if got := f.signedInteraction(t, c.body, c.at, c.secret); got != c.status {
			t.Errorf("%s: status %d, want %d", c.name, got, c.status)
		}
	}
	if msgs := f.h.messages(); len(msgs) != 0 {
		t.Fatalf("refused or ignored interactions submitted %+v", msgs)
	}

	if got := f.signedInteraction(t, click, f.now, slacktest.Secret); got != http.StatusOK {
		t.Fatalf("click: status %d", got)
	}
	deny := slacktest.InteractionForm(slacktest.Click(p, "U1", "ann", ActionDeny, "APPROVALID7", ru))
	if got := f.signedInteraction(t, deny, f.now, slacktest.Secret); got != http.StatusOK {
		t.Fatalf("deny: status %d", got)
	}
	// Acked before it is submitted.
	slacktest.WaitFor(t, "both clicks submitted", deadline, func() bool { return len(f.h.messages()) >= 2 })
	msgs := f.h.messages()
	if len(msgs) != 2 {
		t.Fatalf("submitted %+v", msgs)
	}
	m := msgs[0]
	want := promptThreadMsg()
	if m.Text != "/approve APPROVALID7" || m.ID != "" || m.User != "U2" || m.UserName != "bob" || m.ConversationKey() != want.ConversationKey() || m.DM {
		t.Errorf("click submitted as %+v", m)
	}
	if m.Meta[MetaResponseURL] != ru || m.Meta[metaPromptTS] != p.TS || m.Meta[metaPromptChannel] != "C1" {
		t.Errorf("click meta %v", m.Meta)
	}
	if msgs[1].Text != "/deny APPROVALID7" || msgs[1].User != "U1" {
		t.Errorf("deny submitted as %+v", msgs[1])
	}
}

// TestClickOverSocketMode: an interactive envelope is acked and its click
// submitted like one over HTTP.
func TestClickOverSocketMode(t *testing.T) {
	// Not parallel: it waits for every goroutine of the adapter and slack-go to
	// end, the other tests' too.
	f := newFixture(t, func(c *Config, o *Options) {
		c.AppToken = slacktest.AppToken
		c.SigningSecret = ""
		o.Handler = nil
	})
	stop := startRun(t, f)
	defer stop()
	slacktest.WaitFor(t, "a connection", deadline, func() bool { return f.a.Ready() == nil })
	p, _ := postPrompt(t, f)
	if err := f.slack.SendInteractive("env-other", map[string]any{"type": "shortcut", "callback_id": "x"}); err != nil {
		t.Fatal(err)
	}
	if err := f.slack.SendInteractive("env-click", slacktest.Click(p, "U2", "bob", ActionDeny, "APPROVALID7", "")); err != nil {
		t.Fatal(err)
	}
	slacktest.WaitFor(t, "both envelopes acked", deadline, func() bool {
		return f.slack.Acked("env-other") && f.slack.Acked("env-click")
	})
	slacktest.WaitFor(t, "the click submitted", deadline, func() bool { return len(f.h.messages()) == 1 })
	m := f.h.messages()[0]
	if m.Text != "/deny APPROVALID7" || m.User != "U2" || m.ConversationKey() != promptThreadMsg().ConversationKey() {
		t.Errorf("submitted %+v", m)
	}
}

// clickMsg is the message a click on p was submitted as.
func clickMsg(t *testing.T, f *fixture, p slacktest.Post, user, responseURL string) channels.Message {
	t.Helper()
	b, err := json.Marshal(slacktest.Click(p, user, "name-"+user, ActionApprove, "APPROVALID7", responseURL))
	if err != nil {
		t.Fatal(err)
	}
	var cb slackapi.InteractionCallback
	if err := json.Unmarshal(b, &cb); err != nil {
		t.Fatal(err)
	}
	m, ok, why := f.a.click(cb)
	if !ok {
		t.Fatalf("click not taken: %s", why)
	}
	return m
}

// TestDecisionUpdatesThePrompt: a decision by click replaces the prompt
// with who decided and when, buttons gone, and posts nothing else; a
// refusal goes to the clicker alone and leaves the prompt; a second click
// updates it the same and tells the clicker who decided; an expiry
// updates it silently; a typed decision updates it and is answered in the
// thread.
func TestDecisionUpdatesThePrompt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	p, ref := postPrompt(t, f)
	ctx := context.Background()
	at := time.Unix(1800000100, 0)
	decided := func(outcome string, already bool) *channels.ApprovalDecision {
		return &channels.ApprovalDecision{ID: "APPROVALID7", Code: "ABC234", Tool: "save_skill_reference", Args: "{}",
			Outcome: outcome, Already: already, By: "U1", ByName: "ann", At: at, Prompt: ref}
	}
	ru := f.slack.ResponseURL("c1")

	// A non-approver's click: the clicker alone hears it.
	stranger := clickMsg(t, f, p, "U9", ru)
	if err := f.a.Send(ctx, stranger, channels.Reply{Notice: true, Text: "You can't approve this.", Decided: &channels.ApprovalDecision{Outcome: channels.DecisionNotAllowed}}); err != nil {
		t.Fatal(err)
	}
	if u := f.slack.Updates(); len(u) != 0 {
		t.Fatalf("a refusal updated the prompt: %+v", u)
	}
	last := f.slack.Posts()[len(f.slack.Posts())-1]
	if last.ResponseURL != "/response/c1" || last.ResponseType != "ephemeral" || last.Text != "You can't approve this." {
		t.Fatalf("refusal posted as %+v", last)
	}

	// The approver's click: the prompt is updated, nothing posted.
	before := len(f.slack.Posts())
	approver := clickMsg(t, f, p, "U1", ru)
	if err := f.a.Send(ctx, approver, channels.Reply{Notice: true, Text: "Approved — running save_skill_reference.", Decided: decided(channels.DecisionApproved, false)}); err != nil {
		t.Fatal(err)
	}
	u := f.slack.Updates()
	if len(u) != 1 || u[0].TS != p.TS || u[0].Channel != "C1" {
		t.Fatalf("updates %+v", u)
	}
	if b := blockText(t, u[0].Blocks); strings.Contains(u[0].Blocks, "parley_approve") || !strings.Contains(b, "Approved") || !strings.Contains(b, "<@U1>") || !strings.Contains(b, "<!date^1800000100^") {
		t.Errorf("updated prompt %s", b)
	}
	if n := len(f.slack.Posts()); n != before {
		t.Errorf("a click's decision posted %+v", f.slack.Posts()[before:])
	}

	// A second click: updated the same, the clicker told who decided.
	if err := f.a.Send(ctx, clickMsg(t, f, p, "U2", ru), channels.Reply{Notice: true, Text: "Already approved by ann.", Decided: decided(channels.DecisionApproved, true)}); err != nil {
		t.Fatal(err)
	}
	if u := f.slack.Updates(); len(u) != 2 || u[1].Blocks != u[0].Blocks {
		t.Errorf("second update %+v", u)
	}
	last = f.slack.Posts()[len(f.slack.Posts())-1]
	if last.ResponseType != "ephemeral" || last.Text != "Already approved by ann." {
		t.Errorf("second click answered %+v", last)
	}

	// An expiry: updated, nothing posted.
	before = len(f.slack.Posts())
	exp := decided(channels.DecisionExpired, false)
	exp.By, exp.ByName = "", ""
	if err := f.a.Send(ctx, promptThreadMsg(), channels.Reply{Notice: true, Text: "That approval has expired.", Decided: exp}); err != nil {
		t.Fatal(err)
	}
	if u := f.slack.Updates(); len(u) != 3 || !strings.Contains(u[2].Blocks, "Expired") {
		t.Errorf("expiry update %+v", u)
	}
	if n := len(f.slack.Posts()); n != before {
		t.Errorf("an expiry posted %+v", f.slack.Posts()[before:])
	}

	// A typed /deny: updated and answered in the thread.
	typed := promptThreadMsg()
	typed.Text = "/deny ABC234"
	if err := f.a.Send(ctx, typed, channels.Reply{Notice: true, Text: "Denied — save_skill_reference will not run.", Decided: decided(channels.DecisionDenied, false)}); err != nil {
		t.Fatal(err)
	}
	if u := f.slack.Updates(); len(u) != 4 || !strings.Contains(u[3].Blocks, "Denied") {
		t.Errorf("typed update %+v", u)
	}
	last = f.slack.Posts()[len(f.slack.Posts())-1]
	if last.ThreadTS != "1700000000.000100" || last.ResponseURL != "" || last.EphemeralTo != "" || !strings.Contains(last.Text, "Denied") {
		t.Errorf("typed decision answered %+v", last)
	}

	// A typed refusal and a typed decision too late: to the sender alone,
	// in the thread; the prompt as it was.
	updates := len(f.slack.Updates())
	typed.User = "U9"
	if err := f.a.Send(ctx, typed, channels.Reply{Notice: true, Text: "You can't approve this.", Decided: &channels.ApprovalDecision{Outcome: channels.DecisionNotAllowed}}); err != nil {
		t.Fatal(err)
	}
	last = f.slack.Posts()[len(f.slack.Posts())-1]
	if last.EphemeralTo != "U9" || last.ThreadTS != "1700000000.000100" || last.Text != "You can't approve this." {
		t.Errorf("typed refusal answered %+v", last)
	}
	if err := f.a.Send(ctx, typed, channels.Reply{Notice: true, Text: "Already denied by ann.", Decided: decided(channels.DecisionDenied, true)}); err != nil {
		t.Fatal(err)
	}
	last = f.slack.Posts()[len(f.slack.Posts())-1]
	if last.EphemeralTo != "U9" || last.Text != "Already denied by ann." {
		t.Errorf("typed late decision answered %+v", last)
	}
	if n := len(f.slack.Updates()); n != updates+1 {
		t.Errorf("updates: %d, want %d (only the late decision's, the same again)", n, updates+1)
	}
}

// TestEphemeralAndDMPrompts: a slash command's prompt is ephemeral (posted
// to its response_url, no reference kept); a click on it belongs to the
// clicker's slash conversation and the decision replaces it through the
// click's response_url. A click on a DM prompt belongs to the DM.
func TestEphemeralAndDMPrompts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	slash := channels.Message{Channel: Name, Workspace: slacktest.TeamID, Chat: "C1", Thread: "slash:U1", User: "U1",
		Meta: map[string]string{MetaResponseURL: f.slack.ResponseURL("cmd")}}
	ref, err := f.a.SendPrompt(ctx, slash, promptReply())
	if err != nil || ref != nil {
		t.Fatalf("SendPrompt = %v, %v", ref, err)
	}
	p := f.slack.Posts()[0]
	if p.ResponseType != "ephemeral" || !strings.Contains(p.Blocks, ActionApprove) {
		t.Fatalf("slash prompt %+v", p)
	}
	p.Channel, p.TS = "C1", "1800000000.000009" // as Slack shows it to the clicker
	payload := slacktest.Click(p, "U1", "ann", ActionApprove, "APPROVALID7", f.slack.ResponseURL("eph"))
	payload["container"].(map[string]any)["is_ephemeral"] = true
	b, _ := json.Marshal(payload)
	var cb slackapi.InteractionCallback
	if err := json.Unmarshal(b, &cb); err != nil {
		t.Fatal(err)
	}
	m, ok, why := f.a.click(cb)
	if !ok || m.ConversationKey() != slash.ConversationKey() {
		t.Fatalf("ephemeral click: %v %s %+v", ok, why, m)
	}
	d := &channels.ApprovalDecision{ID: "APPROVALID7", Tool: "t", Args: "{}", Outcome: channels.DecisionApproved, By: "U1", At: time.Now()}
	if err := f.a.Send(ctx, m, channels.Reply{Notice: true, Text: "Approved", Decided: d}); err != nil {
		t.Fatal(err)
	}
	last := f.slack.Posts()[len(f.slack.Posts())-1]
	if last.ResponseURL != "/response/eph" || !last.ReplaceOriginal || !strings.Contains(last.Blocks, "Approved") || strings.Contains(last.Blocks, ActionApprove) {
		t.Errorf("the ephemeral prompt was not replaced: %+v", last)
	}
	if len(f.slack.Posts()) != 2 || len(f.slack.Updates()) != 0 {
		t.Errorf("posts %+v updates %+v", f.slack.Posts(), f.slack.Updates())
	}

	dm := slacktest.Click(slacktest.Post{Channel: "D1", TS: "1800000000.000010"}, "U1", "ann", ActionDeny, "APPROVALID7", "")
	b, _ = json.Marshal(dm)
	cb = slackapi.InteractionCallback{}
	if err := json.Unmarshal(b, &cb); err != nil {
		t.Fatal(err)
	}
	m, ok, _ = f.a.click(cb)
	if !ok || !m.DM || m.Chat != "D1" || m.Thread != "" || m.Text != "/deny APPROVALID7" {
		t.Errorf("DM click %+v", m)
	}
}

// TestClickTheGatewayCannotTake: a click is acked before it is handed
// over, so when the gateway cannot take it (Redis down) the clicker is
// told so through the click's response_url rather than left waiting.
func TestClickTheGatewayCannotTake(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	p, _ := postPrompt(t, f)
	f.h.mu.Lock()
	f.h.err = errors.New("redis down")
	f.h.mu.Unlock()
	click := slacktest.InteractionForm(slacktest.Click(p, "U1", "ann", ActionApprove, "APPROVALID7", f.slack.ResponseURL("down")))
	if got := f.signedInteraction(t, click, f.now, slacktest.Secret); got != http.StatusOK {
		t.Fatalf("status %d", got)
	}
	slacktest.WaitFor(t, "the clicker told", deadline, func() bool {
		for _, p := range f.slack.Posts() {
			if p.ResponseURL == "/response/down" && p.ResponseType == "ephemeral" && strings.Contains(p.Text, "could not take that") {
				return true
			}
		}
		return false
	})
	if len(f.slack.Updates()) != 0 {
		t.Errorf("the prompt changed: %+v", f.slack.Updates())
	}
}
