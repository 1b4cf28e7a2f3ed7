package wechat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/internal/ident"
)

// Approval prompts on a WeCom AI bot: the text prompt (with its code, as
// everywhere) finishes the answer's stream, and a button_interaction
// template card with Approve and Deny comes with it
// (stream_with_template_card on the message's req_id). A click arrives as
// template_card_event on the long connection, on the replica holding it,
// and becomes "/approve ID" or "/deny ID" from the clicker in the chat it
// came from, decided by the gateway like a typed one; its answer, a final
// decision, replaces the card (aibot_respond_update_msg on the click's
// req_id, within WeCom's 5 seconds) with one that names the decision and
// has no live button. A refusal leaves the card as it is: WeCom has no
// message for one member of a group alone, and a typed /approve is
// answered as before.

const (
	cmdUpdateCard  = "aibot_respond_update_msg"
	eventCardClick = "template_card_event"
	// metaCardClick marks the message a click became ("1"); metaApproval
	// names the approval its button carried, metaTaskID the card.
	metaCardClick = "card_click"
	metaApproval  = "approval"
	metaTaskID    = "task_id"
	// Button keys: keyApprove or keyDeny, then the approval id.
	keyApprove = "parley_approve:"
	keyDeny    = "parley_deny:"
	// cardArgsLimit cuts the arguments shown on a card.
	cardArgsLimit = 400
)

// isCardApprovalID says whether id has the shape of an approval id in a
// button's key: 1–64 letters and digits.
func isCardApprovalID(id string) bool { return alnum.Match(id, 1, 64) }

var alnum = ident.Of("A-Za-z0-9")

// reply sends r in answer to m: a click's answer updates the card, a
// prompt carries its card, anything else is text.
func (s *wecomSide) reply(ctx context.Context, m channels.Message, r channels.Reply) error {
	if m.Meta[metaCardClick] == "1" {
		return s.answerClick(ctx, m, r)
	}
	if r.Approval == nil || !isCardApprovalID(r.Approval.ID) {
		return s.send(ctx, m, r.Text)
	}
	card, err := json.Marshal(approvalTemplateCard(r.Approval))
	if err != nil {
		return err
	}
	job := jobFor(m, "reply", r.Text)
	job.Card = card
	if c := s.current(); c != nil {
		err := s.deliver(ctx, c, job)
		if !errors.Is(err, errConnClosed) {
			return err
		}
	}
	return s.enqueue(ctx, job)
}

func cardStreamBody(reqID, content string, card json.RawMessage) map[string]any {
	return map[string]any{"msgtype": "stream_with_template_card",
		"stream":        map[string]any{"id": streamID(reqID), "finish": true, "content": content},
		"template_card": card}
}

// taskID names an approval's card (letters, digits, _-@ at most 128).
func taskID(id string) string { return "parley-approval-" + id }

func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// approvalTemplateCard is the prompt's card: the tool, its arguments (as
// text: a template card has no markup) and the two buttons.
func approvalTemplateCard(ap *channels.Approval) map[string]any {
	return map[string]any{
		"card_type":      "button_interaction",
		"main_title":     map[string]string{"title": "Approval needed", "desc": cut("Tool: "+ap.Tool, 44)},
		"sub_title_text": cut(ap.Args, cardArgsLimit),
		"button_list": []map[string]any{
			{"text": "Approve", "style": 1, "key": keyApprove + ap.ID},
			{"text": "Deny", "style": 2, "key": keyDeny + ap.ID},
		},
		"task_id": taskID(ap.ID),
	}
}

// decidedTemplateCard replaces a decided prompt's card: the decision, who
// and when, and one button that decides nothing.
func decidedTemplateCard(d *channels.ApprovalDecision, task string) map[string]any {
	title := map[string]string{channels.DecisionApproved: "Approved", channels.DecisionDenied: "Denied",
		channels.DecisionExpired: "Approval expired", channels.DecisionCancelled: "Approval cancelled"}[d.Outcome]
	who := d.ByName
	if who == "" {
		who = d.By
	}
	desc := d.At.UTC().Format("2006-01-02 15:04 UTC")
	if who != "" && d.Outcome != channels.DecisionExpired {
		desc = "by " + who + " · " + desc
	}
	return map[string]any{
		"card_type":      "button_interaction",
		"main_title":     map[string]string{"title": title, "desc": cut(desc, 44)},
		"sub_title_text": cut("Tool: "+d.Tool+"\n"+d.Args, cardArgsLimit),
		"button_list":    []map[string]any{{"text": title, "style": 4, "key": "parley_done"}},
		"task_id":        task,
	}
}

// cardClick is the body of template_card_event.
type cardClick struct {
	MsgID    string `json:"msgid"`
	AIBotID  string `json:"aibotid"`
	ChatID   string `json:"chatid"`
	ChatType string `json:"chattype"`
	From     struct {
		UserID string `json:"userid"`
	} `json:"from"`
	Event struct {
		Card struct {
			EventKey string `json:"event_key"`
			TaskID   string `json:"task_id"`
		} `json:"template_card_event"`
	} `json:"event"`
}

// onCardClick turns a click on a prompt card's button into the message it
// stands for; anything else is ignored.
func (s *wecomSide) onCardClick(c *wecomConn, f wsFrame) {
	var b cardClick
	if json.Unmarshal(f.Body, &b) != nil || f.Headers.ReqID == "" || b.From.UserID == "" || (b.ChatType == "group" && b.ChatID == "") {
		s.adapter.reject("bad_frame")
		return
	}
	key := b.Event.Card.EventKey
	var verb, id string
	switch {
	case strings.HasPrefix(key, keyApprove):
		verb, id = "/approve ", strings.TrimPrefix(key, keyApprove)
	case strings.HasPrefix(key, keyDeny):
		verb, id = "/deny ", strings.TrimPrefix(key, keyDeny)
	default:
		return // a decided card's button, or not ours
	}
	if !isCardApprovalID(id) || b.Event.Card.TaskID != taskID(id) {
		s.adapter.reject("bad_frame")
		return
	}
	group := b.ChatType == "group"
	chat := b.From.UserID
	if group {
		chat = b.ChatID
	}
	bot := s.bot
	if b.AIBotID != "" {
		bot = b.AIBotID
	}
	recv := time.Now()
	c.submit(channels.Message{
		// No ID: a second click is answered with what happened; the
		// gateway's atomic decision counts one.
		Channel: Name, Workspace: bot, Chat: chat, User: b.From.UserID, DM: !group,
		Text: verb + id, Received: recv,
		Meta: map[string]string{"via": ViaWeCom, "req_id": f.Headers.ReqID, "chatid": chat,
			"recv_ms":     strconv.FormatInt(recv.UnixMilli(), 10),
			metaCardClick: "1", metaApproval: id, metaTaskID: b.Event.Card.TaskID},
	})
}

// answerClick answers a click's message: a final decision of its approval
// replaces the card; anything else leaves it (and says nothing).
func (s *wecomSide) answerClick(ctx context.Context, m channels.Message, r channels.Reply) error {
	d := r.Decided
	if d == nil || !d.Final() || d.ID != m.Meta[metaApproval] {
		s.log.Debug("WeCom card click refused; the card stays as it is")
		return nil
	}
	c := s.current()
	if c == nil {
		return nil // the click's req_id is answerable only where it came
	}
	body := map[string]any{"response_type": "update_template_card", "template_card": decidedTemplateCard(d, m.Meta[metaTaskID])}
	ack, err := c.call(ctx, cmdUpdateCard, m.Meta["req_id"], body)
	if err != nil {
		return err
	}
	if ack.ErrCode != 0 {
		s.adapter.apiError(wecomCode(ack.ErrCode))
		return fmt.Errorf("wechat: %s: errcode %d %s", cmdUpdateCard, ack.ErrCode, ack.ErrMsg)
	}
	return nil
}
