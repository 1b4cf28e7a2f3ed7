package wechattest

import (
	"encoding/json"
	"testing"
)

// Paths of the WeCom server API that the fake serves.
const (
	WeComTokenPath   = "/cgi-bin/gettoken"
	WeComSendPath    = "/cgi-bin/message/send"
	WeComAppChatPath = "/cgi-bin/appchat/send"
)

// WeComMessageLimit is the size of one text or markdown message, in bytes.
const WeComMessageLimit = 2048

// WeComApp is a fake WeCom server API for one self-built app: gettoken
// (checking corpid and corpsecret), message/send (checking the agentid)
// and appchat/send, each checking the access token it handed out. It
// records every call.
type WeComApp struct {
	*api
	CorpID  string
	Secret  string
	AgentID int
}

// NewWeComApp starts the fake; it closes at cleanup.
func NewWeComApp(t testing.TB, corpID, secret string, agentID int) *WeComApp {
	f := &WeComApp{api: newAPI(t, WeComTokenPath, "corpid", "corpsecret", corpID, secret), CorpID: corpID, Secret: secret, AgentID: agentID}
	f.handlers[WeComSendPath] = f.send
	f.handlers[WeComAppChatPath] = f.appChat
	return f
}

// AppMessage is one message/send or appchat/send body.
type AppMessage struct {
	ToUser   string                   `json:"touser"`
	ChatID   string                   `json:"chatid"`
	AgentID  int                      `json:"agentid"`
	MsgType  string                   `json:"msgtype"`
	Text     struct{ Content string } `json:"text"`
	Markdown struct{ Content string } `json:"markdown"`
	// Replica is the ReplicaHeader of the request.
	Replica string `json:"-"`
}

// Content is the text of the message, whichever its type.
func (m AppMessage) Content() string {
	if m.MsgType == "markdown" {
		return m.Markdown.Content
	}
	return m.Text.Content
}

func (f *WeComApp) send(c *Call) (int, string) {
	m := decode[AppMessage](c.Body)
	switch {
	case m.AgentID != f.AgentID:
		return 40056, "invalid agentid"
	case m.ToUser == "":
		return 40003, "invalid touser"
	}
	if code, msg, ok := f.sendMedia(c); ok { // upload.go
		return code, msg
	}
	if f.duplicateText(c) { // upload.go
		return 0, "ok"
	}
	return checkContent(m)
}

func (f *WeComApp) appChat(c *Call) (int, string) {
	m := decode[AppMessage](c.Body)
	if m.ChatID == "" {
		return 86003, "chat not exist"
	}
	if code, msg, ok := f.sendMedia(c); ok { // upload.go
		return code, msg
	}
	return checkContent(m)
}

func checkContent(m AppMessage) (int, string) {
	switch {
	case m.MsgType != "text" && m.MsgType != "markdown":
		return 40008, "invalid message type"
	case m.Content() == "":
		return 44004, "empty content"
	case len(m.Content()) > WeComMessageLimit:
		return 45002, "content size out of limit"
	}
	return 0, "ok"
}

// Messages returns the messages delivered (message/send and appchat/send
// that succeeded), in order.
func (f *WeComApp) Messages() []AppMessage {
	var out []AppMessage
	for _, c := range f.Calls("") {
		if c.Code != 0 || c.Status != 0 || c.Duplicate || c.Path == MediaUploadPath {
			continue
		}
		m := decode[AppMessage](c.Body)
		m.Replica = c.Replica
		out = append(out, m)
	}
	return out
}

// Encode is a message body as JSON, for logs of failed tests.
func (m AppMessage) Encode() string {
	b, _ := json.Marshal(m)
	return string(b)
}
