package feishutest

// Interactive cards: what a card shows, its buttons, the redraws the code
// under test made (the PATCH calls of cardkit.go), and the clicks a
// test delivers (card.action.trigger, over the HTTP callback or the long
// connection, with Feishu's answer to the click read back).

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Update is one redraw of a sent card.
type Update struct {
	MessageID string
	Text      string // what the card shows now (see CardText)
}

// Button is one button of a card.
type Button struct {
	Text  string
	Type  string
	Value map[string]string
}

// promptCardJSON is the part of a card (schema 1.0) read here.
type promptCardJSON struct {
	Header *struct {
		Title struct {
			Content string `json:"content"`
		} `json:"title"`
	} `json:"header"`
	Elements []cardElement `json:"elements"`
}

type cardElement struct {
	Tag     string `json:"tag"`
	Content string `json:"content"`
	Text    *struct {
		Tag     string `json:"tag"`
		Content string `json:"content"`
	} `json:"text"`
	Elements []struct {
		Tag     string `json:"tag"`
		Content string `json:"content"`
	} `json:"elements"`
	Actions []struct {
		Tag  string `json:"tag"`
		Type string `json:"type"`
		Text struct {
			Content string `json:"content"`
		} `json:"text"`
		Value map[string]string `json:"value"`
	} `json:"actions"`
}

// CardText is what a card shows, line by line: the header's title, then
// markdown, div texts and notes in order (buttons not included).
func CardText(content string) string {
	var card promptCardJSON
	_ = json.Unmarshal([]byte(content), &card)
	var parts []string
	if card.Header != nil && card.Header.Title.Content != "" {
		parts = append(parts, card.Header.Title.Content)
	}
	for _, e := range card.Elements {
		switch e.Tag {
		case "markdown":
			parts = append(parts, e.Content)
		case "div":
			if e.Text != nil {
				parts = append(parts, e.Text.Content)
			}
		case "note":
			for _, n := range e.Elements {
				parts = append(parts, n.Content)
			}
		}
	}
	return strings.Join(parts, "\n")
}

// cardText is a sent card's Text: its markdown elements alone, as before
// cards had anything else, or CardText for a card with a header.
func cardText(content string) string {
	var card promptCardJSON
	_ = json.Unmarshal([]byte(content), &card)
	if card.Header != nil {
		return CardText(content)
	}
	var parts []string
	for _, e := range card.Elements {
		if e.Tag == "markdown" {
			parts = append(parts, e.Content)
		}
	}
	return strings.Join(parts, "\n")
}

// Buttons lists a card's buttons.
func Buttons(content string) []Button {
	var card promptCardJSON
	_ = json.Unmarshal([]byte(content), &card)
	var out []Button
	for _, e := range card.Elements {
		for _, a := range e.Actions {
			if a.Tag == "button" {
				out = append(out, Button{Text: a.Text.Content, Type: a.Type, Value: a.Value})
			}
		}
	}
	return out
}

// Updates lists the card redraws accepted (PATCH of a shared card), in
// order.
func (s *Server) Updates() []Update {
	var out []Update
	for _, c := range s.Calls() {
		if c.Op == OpPatch && !c.Refused {
			out = append(out, Update{MessageID: c.MessageID, Text: c.Content})
		}
	}
	return out
}

// CardAction describes a card.action.trigger callback: a click on a
// button of a card sent to a chat.
type CardAction struct {
	EventID   string // default "ev_click_" + the clock
	Token     string // header.token
	TenantKey string // default "tenant1"
	Operator  string // open_id of the one who clicked
	MessageID string // the card's message
	ChatID    string
	Tag       string // default button
	Value     map[string]string
}

// Click renders a as Feishu's card.action.trigger (schema 2.0).
func Click(a CardAction) []byte {
	if a.EventID == "" {
		a.EventID = "ev_click_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	if a.TenantKey == "" {
		a.TenantKey = "tenant1"
	}
	if a.Tag == "" {
		a.Tag = "button"
	}
	ev := map[string]any{
		"schema": "2.0",
		"header": map[string]any{"event_id": a.EventID, "event_type": "card.action.trigger", "create_time": strconv.FormatInt(time.Now().UnixMicro(), 10),
			"token": a.Token, "app_id": "cli_test", "tenant_key": a.TenantKey},
		"event": map[string]any{
			"operator": map[string]any{"tenant_key": a.TenantKey, "open_id": a.Operator, "union_id": "on_" + a.Operator},
			"token":    "c-update-token",
			"action":   map[string]any{"value": a.Value, "tag": a.Tag},
			"host":     "im_message",
			"context":  map[string]any{"open_message_id": a.MessageID, "open_chat_id": a.ChatID},
		},
	}
	b, _ := json.Marshal(ev)
	return b
}

// ClickAnswer is the answer to a click: a toast for the one who clicked
// and the card to show instead, if any.
type ClickAnswer struct {
	Toast *struct {
		Type    string `json:"type"`
		Content string `json:"content"`
	} `json:"toast"`
	Card *struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	} `json:"card"`
}

// CardText is what the answer's card shows ("" without a card).
func (c ClickAnswer) CardText() string {
	if c.Card == nil {
		return ""
	}
	return CardText(string(c.Card.Data))
}

// ToastText is the toast's text ("" without one).
func (c ClickAnswer) ToastText() string {
	if c.Toast == nil {
		return ""
	}
	return c.Toast.Content
}

// PushClick delivers a click over a long connection and returns the
// client's status and its answer to the click.
func (s *Server) PushClick(ctx context.Context, click []byte) (int, ClickAnswer, error) {
	resp, err := s.push(ctx, click, 1)
	var ans ClickAnswer
	if err == nil && len(resp.Data) > 0 {
		err = json.Unmarshal(resp.Data, &ans)
	}
	return resp.StatusCode, ans, err
}
