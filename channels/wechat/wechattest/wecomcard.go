package wechattest

import "encoding/json"

// CardClick is a template_card_event to push: a member's click on a
// button of a template card.
type CardClick struct {
	ReqID    string
	MsgID    string
	ChatID   string // empty for a single chat
	ChatType string // "single" (default) or "group"
	User     string
	EventKey string // the button's key
	TaskID   string // the card's task_id
}

// SendCardClick pushes a click as aibot_event_callback to the subscribed
// connection, the way WeCom nests it (event.template_card_event).
func (f *WeCom) SendCardClick(cl CardClick) error {
	if cl.ChatType == "" {
		cl.ChatType = "single"
	}
	body := map[string]any{"msgid": cl.MsgID, "aibotid": f.BotID, "chattype": cl.ChatType, "create_time": 1700000000,
		"from": map[string]string{"userid": cl.User}, "msgtype": "event",
		"event": map[string]any{"eventtype": "template_card_event", "template_card_event": map[string]any{
			"card_type": "button_interaction", "event_key": cl.EventKey, "task_id": cl.TaskID}}}
	if cl.ChatID != "" {
		body["chatid"] = cl.ChatID
	}
	raw, err := json.Marshal(map[string]any{"cmd": "aibot_event_callback", "headers": map[string]string{"req_id": cl.ReqID}, "body": body})
	if err != nil {
		return err
	}
	return f.SendRaw(raw)
}

// TemplateCard is the template card of a frame's body ("" fields when it
// has none): an aibot_respond_msg's (stream_with_template_card) or an
// aibot_respond_update_msg's.
type TemplateCard struct {
	CardType  string `json:"card_type"`
	MainTitle struct {
		Title string `json:"title"`
		Desc  string `json:"desc"`
	} `json:"main_title"`
	SubTitle string `json:"sub_title_text"`
	Buttons  []struct {
		Text  string `json:"text"`
		Style int    `json:"style"`
		Key   string `json:"key"`
	} `json:"button_list"`
	TaskID string `json:"task_id"`
}

// Card decodes the frame's template card.
func (f Frame) Card() (msgType, responseType string, card TemplateCard) {
	var b struct {
		MsgType      string       `json:"msgtype"`
		ResponseType string       `json:"response_type"`
		Card         TemplateCard `json:"template_card"`
	}
	_ = json.Unmarshal(f.Body, &b)
	return b.MsgType, b.ResponseType, b.Card
}
