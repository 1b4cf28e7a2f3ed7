package slack

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack/slacktest"
)

// TestAQuestionHasButtonsAndAClickIsAnAnswer: a question with choices is
// posted in the thread with a button for each and Decline and Cancel; a
// signed click is submitted as "/answer ID CHOICE" from the clicker,
// without an id; a forged value (markup, a second command) submits
// nothing.
func TestAQuestionHasButtonsAndAClickIsAnAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if err := f.a.Identify(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := channels.Reply{Notice: true, Text: "**deployer asks:** Go?", Question: &channels.Question{
		ID: "QUESTIONID42", From: "deployer", Message: "Go?",
		Choices: []channels.Choice{{Value: "true", Label: "Yes"}, {Value: "false", Label: "No"}},
	}}
	if err := f.a.Send(context.Background(), promptThreadMsg(), r); err != nil {
		t.Fatal(err)
	}
	posts := f.slack.Posts()
	if len(posts) != 1 || posts[0].ThreadTS != "1700000000.000100" {
		t.Fatalf("posts %+v", posts)
	}
	var blocks []struct {
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		}
	}
	if err := json.Unmarshal([]byte(posts[0].Blocks), &blocks); err != nil {
		t.Fatal(err)
	}
	var buttons []string
	for _, b := range blocks {
		for _, e := range b.Elements {
			buttons = append(buttons, e.ActionID+"="+e.Value)
		}
	}
	want := "parley_answer_0=QUESTIONID42 true parley_answer_1=QUESTIONID42 false parley_answer_2=QUESTIONID42 decline parley_answer_3=QUESTIONID42 cancel"
	if strings.Join(buttons, " ") != want {
		t.Fatalf("buttons %v", buttons)
	}
	ru := f.slack.ResponseURL("q1")
	for _, forged := range []string{"QUESTIONID42 <!channel>", "QUESTIONID42", "QUESTION\nID true", "QUESTIONID42 true /reset"} {
		body := slacktest.InteractionForm(slacktest.Click(posts[0], "U1", "ann", "parley_answer_0", forged, ru))
		if got := f.signedInteraction(t, body, f.now, slacktest.Secret); got != http.StatusOK {
			t.Fatalf("%q: status %d", forged, got)
		}
	}
	click := slacktest.InteractionForm(slacktest.Click(posts[0], "U1", "ann", "parley_answer_1", "QUESTIONID42 false", ru))
	if got := f.signedInteraction(t, click, f.now, "not-the-secret"); got != http.StatusUnauthorized {
		t.Fatalf("unsigned click: %d", got)
	}
	if got := f.signedInteraction(t, click, f.now, slacktest.Secret); got != http.StatusOK {
		t.Fatalf("click: %d", got)
	}
	slacktest.WaitFor(t, "the click submitted", deadline, func() bool { return len(f.h.messages()) >= 1 })
	msgs := f.h.messages()
	if len(msgs) != 1 || msgs[0].Text != "/answer QUESTIONID42 false" || msgs[0].ID != "" || msgs[0].User != "U1" ||
		msgs[0].ConversationKey() != promptThreadMsg().ConversationKey() {
		t.Fatalf("submitted %+v", msgs)
	}
}
