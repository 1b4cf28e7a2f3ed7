package slack

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	slackapi "github.com/slack-go/slack"

	"github.com/parleyhq/parley/channels"
)

// A question from a tool's server (channels.Question) with fixed choices
// is a Block Kit message: the question as text, then a button for each
// choice and Decline and Cancel. A button carries the question's id and
// the choice, nothing else; whether a click answers anything is decided
// by the gateway (see interactions.go). A question without choices, or
// with more than fit, is the text, which says what to type.

// Block and action ids of a question.
const (
	QuestionBlockID = "parley_question"
	// ActionAnswer prefixes the action id of each button of a question
	// (action ids must differ within a block).
	ActionAnswer = "parley_answer_"
)

// maxButtons is how many buttons one actions block holds (Slack's limit
// is 25; two are Decline and Cancel).
const maxButtons = 23

// sendQuestion posts r, whose Question is set, into m's thread.
func (a *Adapter) sendQuestion(ctx context.Context, m channels.Message, r channels.Reply) error {
	q := r.Question
	text := channels.Split(ToMrkdwn(r.Text, false), maxSectionText)[0]
	blocks := []slackapi.Block{
		slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, text, false, false), nil, nil),
		slackapi.NewActionBlock(QuestionBlockID, questionButtons(q)...),
	}
	if _, _, err := a.postBlocks(ctx, m, q.From+" asks a question", blocks); err != nil {
		return fmt.Errorf("slack: question: %w", err)
	}
	return nil
}

// maxSectionText is the most a section block's text may hold.
const maxSectionText = 3000

// questionButtons are the choices, then Decline and Cancel.
func questionButtons(q *channels.Question) []slackapi.BlockElement {
	var out []slackapi.BlockElement
	button := func(label, choice string) *slackapi.ButtonBlockElement {
		id := ActionAnswer + strconv.Itoa(len(out))
		return slackapi.NewButtonBlockElement(id, q.ID+" "+choice, slackapi.NewTextBlockObject(slackapi.PlainTextType, cutLabel(label), false, false))
	}
	for _, c := range q.Choices {
		b := button(c.Label, c.Value)
		if len(out) == 0 {
			b.Style = slackapi.StylePrimary
		}
		out = append(out, b)
	}
	decline := button("Decline", channels.AnswerDecline)
	decline.Style = slackapi.StyleDanger
	out = append(out, decline)
	out = append(out, button("Cancel", channels.AnswerCancel))
	return out
}

// cutLabel keeps a button's text within Slack's 75 characters.
func cutLabel(s string) string {
	if r := []rune(s); len(r) > 75 {
		return string(r[:74]) + "…"
	}
	return s
}

// answerClick reads a question button's value ("ID CHOICE"); ok is false
// for a value no question's button carries.
func answerClick(actionID, value string) (text string, ok bool) {
	if !strings.HasPrefix(actionID, ActionAnswer) {
		return "", false
	}
	id, choice, found := strings.Cut(value, " ")
	if !found || !isApprovalValue(id) || !channels.IsAnswerValue(choice) {
		return "", false
	}
	return channels.AnswerText(id, choice), true
}
