package wechattest

import (
	"testing"
)

// Paths of the Official Account API that the fake serves.
const (
	OATokenPath  = "/cgi-bin/token"
	OACustomPath = "/cgi-bin/message/custom/send"
	OATypingPath = "/cgi-bin/message/custom/typing"
)

// OAMessageLimit is the size of one customer-service text message, in
// bytes.
const OAMessageLimit = 2048

// OfficialAccount is a fake Official Account API: token (checking appid
// and secret), message/custom/send (answering errcode 45015 for a user
// whose 48-hour window is closed) and message/custom/typing, each checking
// the access token it handed out. It records every call.
type OfficialAccount struct {
	*api
	AppID  string
	Secret string

	closed map[string]bool // users whose reply window is closed
}

// NewOfficialAccount starts the fake; it closes at cleanup.
func NewOfficialAccount(t testing.TB, appID, secret string) *OfficialAccount {
	f := &OfficialAccount{api: newAPI(t, OATokenPath, "appid", "secret", appID, secret), AppID: appID, Secret: secret, closed: map[string]bool{}}
	f.handlers[OACustomPath] = f.custom
	f.handlers[OATypingPath] = f.typing
	return f
}

// CustomMessage is one message/custom/send body.
type CustomMessage struct {
	ToUser  string `json:"touser"`
	MsgType string `json:"msgtype"`
	Text    struct {
		Content string `json:"content"`
	} `json:"text"`
	Replica string `json:"-"`
}

// TypingCall is one message/custom/typing body.
type TypingCall struct {
	ToUser  string `json:"touser"`
	Command string `json:"command"`
}

// CloseWindow makes custom/send to user fail as it does 48 hours after the
// user's last message (errcode 45015); open is the reverse.
func (f *OfficialAccount) CloseWindow(user string, closed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed[user] = closed
}

func (f *OfficialAccount) custom(c *Call) (int, string) {
	m := decode[CustomMessage](c.Body)
	f.mu.Lock()
	closed := f.closed[m.ToUser]
	f.mu.Unlock()
	if !closed && m.ToUser != "" {
		if code, msg, ok := f.sendMedia(c); ok { // upload.go
			return code, msg
		}
	}
	switch {
	case m.ToUser == "":
		return 40003, "invalid openid"
	case closed:
		return 45015, "response out of time limit or subscription is canceled"
	case m.MsgType != "text":
		return 40008, "invalid message type"
	case m.Text.Content == "":
		return 44004, "empty content"
	case len(m.Text.Content) > OAMessageLimit:
		return 45002, "content size out of limit"
	}
	return 0, "ok"
}

func (f *OfficialAccount) typing(c *Call) (int, string) {
	m := decode[TypingCall](c.Body)
	if m.Command != "Typing" && m.Command != "CancelTyping" {
		return 45072, "invalid command"
	}
	return 0, "ok"
}

// CustomMessages returns the customer-service messages delivered, in
// order.
func (f *OfficialAccount) CustomMessages() []CustomMessage {
	var out []CustomMessage
	for _, c := range f.Delivered(OACustomPath) {
		m := decode[CustomMessage](c.Body)
		m.Replica = c.Replica
		out = append(out, m)
	}
	return out
}

// Typings returns the typing calls received.
func (f *OfficialAccount) Typings() []TypingCall {
	var out []TypingCall
	for _, c := range f.Calls(OATypingPath) {
		out = append(out, decode[TypingCall](c.Body))
	}
	return out
}
