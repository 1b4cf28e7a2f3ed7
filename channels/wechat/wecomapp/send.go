package wecomapp

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/parleyhq/parley/channels"
)

// MessageLimit is the size of one text or markdown message: WeCom cuts
// longer ones.
const MessageLimit = 2048

// questionChars is how much of the question an answer in a group chat
// quotes.
const questionChars = 200

// API paths.
const (
	sendPath    = "/cgi-bin/message/send"
	appChatPath = "/cgi-bin/appchat/send"
)

// Send implements channels.Channel: the answer goes to the member who
// asked, or — for an app with an appchat — the model's answers go to that
// group chat, quoting the question; notices (refusals, command results)
// stay private.
func (a *Adapter) Send(ctx context.Context, m channels.Message, r channels.Reply) error {
	ap, ok := a.apps[m.Workspace]
	if !ok {
		return fmt.Errorf("wecom_app: no app %q is configured", m.Workspace)
	}
	if ap.cfg.AppChat != "" && !r.Notice {
		return a.sendText(ctx, ap, "", ap.cfg.AppChat, a.quoted(ap, m, r.Text))
	}
	return a.sendText(ctx, ap, m.Chat, "", r.Text)
}

// quoted is an answer for the group chat: who asked what, then the answer.
func (a *Adapter) quoted(ap *app, m channels.Message, answer string) string {
	q := strings.Join(strings.Fields(m.Text), " ")
	if utf8.RuneCountInString(q) > questionChars {
		q = string([]rune(q)[:questionChars]) + "…"
	}
	if ap.cfg.Format == FormatText {
		return m.User + ": " + q + "\n\n" + answer
	}
	return "> " + m.User + ": " + q + "\n\n" + answer
}

// sendText sends text to a member (user) or a group chat (chat) in the
// app's format, in as many messages as MessageLimit needs.
func (a *Adapter) sendText(ctx context.Context, ap *app, user, chat, text string) error {
	msgType := ap.cfg.Format
	if msgType == FormatText {
		text = channels.PlainText(text)
	}
	parts := channels.Split(text, MessageLimit)
	if len(parts) == 0 {
		parts = []string{"…"}
	}
	for i, part := range parts {
		body := map[string]any{"msgtype": msgType, msgType: map[string]string{"content": part}}
		path, op := sendPath, "message/send"
		if chat != "" {
			body["chatid"] = chat
			path, op = appChatPath, "appchat/send"
		} else {
			body["touser"] = user
			body["agentid"] = ap.cfg.AgentID
		}
		if err := ap.api.Call(ctx, op, path, body, nil); err != nil {
			return fmt.Errorf("wecom_app: %w (part %d of %d)", err, i+1, len(parts))
		}
	}
	return nil
}

// Posts implements channels.PostCounter: how many messages Send makes of
// text (the group chat's quoted question aside).
func (a *Adapter) Posts(m channels.Message, text string) int {
	if ap, ok := a.apps[m.Workspace]; ok && ap.cfg.Format == FormatText {
		text = channels.PlainText(text)
	}
	return max(len(channels.Split(text, MessageLimit)), 1)
}
