package wechattest

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// WeCom is a fake WeCom AI bot long-connection server. It checks the
// subscription, answers every frame with errcode 0 (or a scripted code),
// kicks an older connection of the same bot when a new one subscribes,
// and records every frame it receives.
type WeCom struct {
	srv    *httptest.Server
	BotID  string
	Secret string

	mu         sync.Mutex
	conns      []*wsConn
	current    *wsConn
	frames     []Frame
	subscribes int
	maxLive    int
	respondErr map[string]int  // req_id → errcode for aibot_respond_msg
	expired    map[string]bool // stream ids WeCom no longer lets be updated
	finished   map[string]bool // stream ids finished
	up         wecomUploads    // media uploads and messages (wecom_upload.go)
}

// Frame is one frame a client sent.
type Frame struct {
	Cmd     string          `json:"cmd"`
	ReqID   string          `json:"-"`
	Body    json.RawMessage `json:"body"`
	Conn    int             `json:"-"` // which connection (1, 2, …)
	At      time.Time       `json:"-"` // when the fake received it
	ErrCode int             `json:"-"` // the errcode the fake answered (0: accepted)
	Headers struct {
		ReqID string `json:"req_id"`
	} `json:"headers"`
}

// Stream is the stream part of an aibot_respond_msg body.
type Stream struct {
	ID      string `json:"id"`
	Finish  bool   `json:"finish"`
	Content string `json:"content"`
}

// Stream decodes the stream of an aibot_respond_msg frame.
func (f Frame) Stream() Stream {
	var b struct {
		Stream Stream `json:"stream"`
	}
	_ = json.Unmarshal(f.Body, &b)
	return b.Stream
}

// Markdown decodes the content of an aibot_send_msg frame and its chatid.
func (f Frame) Markdown() (chatID, content string) {
	var b struct {
		ChatID   string `json:"chatid"`
		Markdown struct {
			Content string `json:"content"`
		} `json:"markdown"`
	}
	_ = json.Unmarshal(f.Body, &b)
	return b.ChatID, b.Markdown.Content
}

type wsConn struct {
	n          int
	ws         *websocket.Conn
	wmu        sync.Mutex
	subscribed bool
	closed     bool
}

func (c *wsConn) send(v any) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.WriteJSON(v)
}

func (c *wsConn) sendRaw(raw []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.WriteMessage(websocket.TextMessage, raw)
}

// NewWeCom starts a fake server for one bot; Close runs at cleanup.
func NewWeCom(t testing.TB, botID, secret string) *WeCom {
	f := &WeCom{BotID: botID, Secret: secret, respondErr: map[string]int{}, expired: map[string]bool{}, finished: map[string]bool{}}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		f.serve(ws)
	}))
	t.Cleanup(func() {
		f.mu.Lock()
		for _, c := range f.conns {
			c.ws.Close()
		}
		f.mu.Unlock()
		f.srv.Close()
	})
	return f
}

// URL is the ws:// address.
func (f *WeCom) URL() string { return "ws" + strings.TrimPrefix(f.srv.URL, "http") }

func (f *WeCom) serve(ws *websocket.Conn) {
	f.mu.Lock()
	c := &wsConn{n: len(f.conns) + 1, ws: ws}
	f.conns = append(f.conns, c)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		c.closed = true
		if f.current == c {
			f.current = nil
		}
		f.mu.Unlock()
		ws.Close()
	}()
	for {
		_, raw, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var fr Frame
		if err := json.Unmarshal(raw, &fr); err != nil {
			continue
		}
		fr.ReqID, fr.Conn, fr.At = fr.Headers.ReqID, c.n, time.Now()
		ack, kick := f.answer(c, fr)
		if kick != nil {
			_ = kick.send(map[string]any{"cmd": "aibot_event_callback", "headers": map[string]string{"req_id": "evt"},
				"body": map[string]any{"msgtype": "event", "event": map[string]string{"eventtype": "disconnected_event"}}})
			kick.ws.Close()
		}
		if err := c.send(ack); err != nil {
			return
		}
	}
}

// answer records a frame from c and returns its ack, and the connection
// a subscription takes over from (to be kicked), if any.
func (f *WeCom) answer(c *wsConn, fr Frame) (map[string]any, *wsConn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frames = append(f.frames, fr)
	ack := map[string]any{"headers": map[string]string{"req_id": fr.ReqID}, "errcode": 0, "errmsg": "ok"}
	var kick *wsConn
	switch fr.Cmd {
	case "aibot_subscribe":
		kick = f.subscribe(c, fr, ack)
	case "aibot_respond_msg":
		f.respond(fr, ack)
	default:
		f.uploadFrame(fr, ack) // wecom_upload.go
	}
	if code, _ := ack["errcode"].(int); code != 0 {
		f.frames[len(f.frames)-1].ErrCode = code
	}
	return ack, kick
}

// subscribe makes c the bot's connection if the credentials hold, and
// returns the one it replaces. f.mu is held.
func (f *WeCom) subscribe(c *wsConn, fr Frame, ack map[string]any) (kick *wsConn) {
	var b struct {
		BotID  string `json:"bot_id"`
		Secret string `json:"secret"`
	}
	_ = json.Unmarshal(fr.Body, &b)
	if b.BotID != f.BotID || b.Secret != f.Secret {
		ack["errcode"], ack["errmsg"] = 40058, "invalid bot_id or secret"
		return nil
	}
	f.subscribes++
	if f.current != nil && f.current != c {
		kick = f.current
	}
	c.subscribed = true
	f.current = c
	live := 0
	for _, x := range f.conns {
		if x.subscribed && !x.closed && x != kick {
			live++
		}
	}
	f.maxLive = max(f.maxLive, live)
	return kick
}

// respond checks a reply frame against the scripted failures and the
// stream's state. f.mu is held.
func (f *WeCom) respond(fr Frame, ack map[string]any) {
	if code, ok := f.respondErr[fr.ReqID]; ok {
		ack["errcode"], ack["errmsg"] = code, "req_id expired"
		return
	}
	st := fr.Stream()
	if st.ID == "" {
		return
	}
	switch {
	case f.finished[st.ID]:
		ack["errcode"], ack["errmsg"] = 846605, "stream message already finished"
	case f.expired[st.ID]:
		ack["errcode"], ack["errmsg"] = 846608, "stream message update expired"
	case st.Finish:
		f.finished[st.ID] = true
	}
}

// ExpireReqID makes aibot_respond_msg on reqID fail with errcode.
func (f *WeCom) ExpireReqID(reqID string, errcode int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.respondErr[reqID] = errcode
}

// ExpireStream makes every further aibot_respond_msg on the stream id
// fail with errcode 846608, as WeCom does about six minutes after the
// stream's first frame. Tests expire a stream at a chosen point of the
// answer instead of waiting for a clock.
func (f *WeCom) ExpireStream(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expired[id] = true
}

// Subscribes is how many subscriptions succeeded.
func (f *WeCom) Subscribes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.subscribes
}

// MaxLive is the most subscribed connections that were open at once
// (a kicked connection no longer counts).
func (f *WeCom) MaxLive() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxLive
}

// Connected reports whether a subscribed connection is open.
func (f *WeCom) Connected() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.current != nil
}

// Frames returns the received frames with cmd (all when cmd is "").
func (f *WeCom) Frames(cmd string) []Frame {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Frame
	for _, fr := range f.frames {
		if cmd == "" || fr.Cmd == cmd {
			out = append(out, fr)
		}
	}
	return out
}

// ErrNotConnected means no client is subscribed.
var ErrNotConnected = errors.New("wechattest: no subscribed WeCom connection")

// SendRaw writes raw bytes to the subscribed connection.
func (f *WeCom) SendRaw(raw []byte) error {
	f.mu.Lock()
	c := f.current
	f.mu.Unlock()
	if c == nil {
		return ErrNotConnected
	}
	return c.sendRaw(raw)
}

// Callback is an aibot_msg_callback to push.
type Callback struct {
	ReqID    string
	MsgID    string
	ChatID   string // empty for a single chat
	ChatType string // "single" or "group"
	User     string
	MsgType  string // text (default), mixed, image, file, or any other type (sent without content)
	Text     string
	// Images are the image of an image message, the images after the
	// text of a mixed one; File the file of a file message.
	Images []MediaRef
	File   *MediaRef
}

// MediaRef is an image or file as WeCom sends it: an address on its media
// host and the key the file is encrypted with.
type MediaRef struct {
	URL, AESKey, FileName string
}

func (r MediaRef) wire() map[string]string {
	m := map[string]string{"url": r.URL, "aeskey": r.AESKey}
	if r.FileName != "" {
		m["filename"] = r.FileName
	}
	return m
}

// SendCallback pushes an aibot_msg_callback to the subscribed connection.
func (f *WeCom) SendCallback(cb Callback) error {
	if cb.MsgType == "" {
		cb.MsgType = "text"
	}
	if cb.ChatType == "" {
		cb.ChatType = "single"
	}
	body := map[string]any{"msgid": cb.MsgID, "aibotid": f.BotID, "chattype": cb.ChatType,
		"from": map[string]string{"userid": cb.User}, "msgtype": cb.MsgType}
	if cb.ChatID != "" {
		body["chatid"] = cb.ChatID
	}
	switch cb.MsgType {
	case "text":
		body["text"] = map[string]string{"content": cb.Text}
	case "mixed":
		items := []any{map[string]any{"msgtype": "text", "text": map[string]string{"content": cb.Text}}}
		for _, img := range cb.Images {
			items = append(items, map[string]any{"msgtype": "image", "image": img.wire()})
		}
		body["mixed"] = map[string]any{"msg_item": items}
	case "image":
		if len(cb.Images) > 0 {
			body["image"] = cb.Images[0].wire()
		}
	case "file":
		if cb.File != nil {
			body["file"] = cb.File.wire()
		}
	}
	raw, _ := json.Marshal(map[string]any{"cmd": "aibot_msg_callback", "headers": map[string]string{"req_id": cb.ReqID}, "body": body})
	return f.SendRaw(raw)
}

// Drop closes the subscribed connection from the server side.
func (f *WeCom) Drop() {
	f.mu.Lock()
	c := f.current
	f.current = nil
	f.mu.Unlock()
	if c != nil {
		c.ws.Close()
	}
}

// WaitFor polls cond until it holds or timeout passes.
func WaitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}
