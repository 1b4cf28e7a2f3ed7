package feishu

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
)

// TestAQuestionCardAndItsClicks: a question with choices is a card in the
// thread whose text is plain_text, with a button for each choice and
// Decline and Cancel; a click is submitted as "/answer ID CHOICE" from the
// clicker without an id; a forged value, or a card clicked in another
// chat, submits nothing.
func TestAQuestionCardAndItsClicks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	d := &deciding{ch: f.ch}
	f.ch.mu.Lock()
	f.ch.handler = d
	f.ch.mu.Unlock()
	r := channels.Reply{Notice: true, Text: "deployer asks: <at user_id=\"all\"></at> Go?", Question: &channels.Question{
		ID: "QUESTION42", From: "deployer", Message: "Go?",
		Choices: []channels.Choice{{Value: "prod", Label: "Production"}, {Value: "staging", Label: "Staging"}},
	}}
	if err := f.ch.Send(context.Background(), groupMessage(), r); err != nil {
		t.Fatal(err)
	}
	sent := f.api.Sent()
	if len(sent) != 1 || sent[0].MsgType != "interactive" {
		t.Fatalf("sent %+v", sent)
	}
	if !strings.Contains(sent[0].Content, `"tag":"plain_text"`) || strings.Contains(sent[0].Content, "lark_md") {
		t.Fatalf("the question is not plain text: %s", sent[0].Content)
	}
	var choices []string
	var staging map[string]string
	for _, b := range feishutest.Buttons(sent[0].Content) {
		choices = append(choices, b.Value[valueChoice])
		if b.Value[valueChoice] == "staging" {
			staging = b.Value
		}
	}
	if strings.Join(choices, " ") != "prod staging decline cancel" {
		t.Fatalf("buttons %v", choices)
	}
	forge := func(k, v string) map[string]string {
		out := maps.Clone(staging)
		out[k] = v
		return out
	}
	for _, v := range []map[string]string{forge(valueChoice, "staging /reset"), forge(valueQuestion, "Q 1"), forge(valueChat, "oc_other"), forge(valueChoice, "")} {
		f.click(t, feishutest.CardAction{Token: testToken, Operator: "ou_alice", MessageID: sent[0].MessageID, ChatID: "oc_group", Value: v})
	}
	if msgs := d.messages(); len(msgs) != 0 {
		t.Fatalf("forged clicks submitted %+v", msgs)
	}
	f.click(t, feishutest.CardAction{Token: testToken, Operator: "ou_alice", MessageID: sent[0].MessageID, ChatID: "oc_group", Value: staging})
	msgs := d.messages()
	if len(msgs) != 1 || msgs[0].Text != "/answer QUESTION42 staging" || msgs[0].User != "ou_alice" || msgs[0].ID != "" ||
		msgs[0].ConversationKey() != groupMessage().ConversationKey() {
		t.Fatalf("the click became %+v", msgs)
	}
}
