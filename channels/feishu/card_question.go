package feishu

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/parleyhq/parley/channels"
)

// A question from a tool's server (channels.Question) with fixed choices
// is an interactive card: the question in plain_text (shown as typed, so
// nothing in the server's words becomes an <at> or markup), a button for
// each choice, and Decline and Cancel. A button's value names the
// question and the choice and, as an approval's does, the conversation it
// was sent to; the gateway decides whether a click answers anything.

// Keys of a question button's value.
const (
	valueQuestion = "parley_question" // the question id
	valueChoice   = "choice"
)

// maxQuestionButtons bounds a card's buttons (the rest is typed).
const maxQuestionButtons = 20

// sendQuestion sends r, whose Question has choices, as a card; a card
// Feishu refuses is sent as text.
func (a *Adapter) sendQuestion(ctx context.Context, m channels.Message, r channels.Reply) error {
	q := r.Question
	value := map[string]string{valueQuestion: q.ID, valueChat: m.Chat, valueThread: m.Thread}
	if m.DM {
		value[valueDM] = "1"
	}
	card, err := json.Marshal(questionCard(r.Text, q, value))
	if err != nil {
		return err
	}
	if err := a.waitChat(ctx, m); err != nil {
		return err
	}
	_, err = a.postWith(ctx, a.calls, m, "interactive", string(card), sendUUID(m, 0, "question:"+q.ID, ""))
	var apiErr *APIError
	if err != nil && errors.As(err, &apiErr) && !apiErr.Retryable() {
		a.log.Warn("question card refused; sending the question as text", "code", apiErr.Code, "msg", apiErr.Msg, "log_id", apiErr.LogID)
		return a.Send(ctx, m, channels.Reply{Text: r.Text, Notice: true})
	}
	return err
}

// questionCard is the question, its buttons and the choices' values.
func questionCard(text string, q *channels.Question, value map[string]string) map[string]any {
	button := func(label, kind, choice string) map[string]any {
		v := map[string]string{valueChoice: choice}
		for k, s := range value {
			v[k] = s
		}
		return map[string]any{"tag": "button", "text": plain(label), "type": kind, "value": v}
	}
	var actions []any
	for _, c := range q.Choices {
		actions = append(actions, button(c.Label, "default", c.Value))
	}
	actions = append(actions, button("Decline", "danger", channels.AnswerDecline), button("Cancel", "default", channels.AnswerCancel))
	return map[string]any{
		"config": map[string]any{"wide_screen_mode": true},
		"header": map[string]any{"template": "blue", "title": plain("A question from " + q.From)},
		"elements": []any{
			map[string]any{"tag": "div", "text": plain(text)},
			map[string]any{"tag": "action", "actions": actions},
		},
	}
}

// questionClick is the message text of a click on a question's button;
// ok is false for a value no question's button carries.
func questionClick(v map[string]string) (text, id string, ok bool) {
	id, choice := v[valueQuestion], v[valueChoice]
	if !isApprovalID(id) || !channels.IsAnswerValue(choice) {
		return "", "", false
	}
	return channels.AnswerText(id, choice), id, true
}
