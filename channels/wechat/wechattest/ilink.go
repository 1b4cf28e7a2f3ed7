// Package wechattest runs fake iLink and WeCom servers for tests of the
// WeChat channel and of `parley serve` with it.
package wechattest

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ReplicaHeader is a header tests may add (with a wrapping transport) to
// tell which replica made a request; the fakes record it.
const ReplicaHeader = "X-Test-Replica"

// ILink is a fake iLink server: it walks a scripted QR login, serves
// messages in batches with a cursor, can end the session with errcode -14,
// and records every send.
type ILink struct {
	srv      *httptest.Server
	redirect *httptest.Server

	BotID string

	mu       sync.Mutex
	botToken string
	// LoginSteps are the statuses get_qrcode_status answers in order
	// ("wait", "scaned", "expired", "need_verifycode",
	// "scaned_but_redirect", "confirmed", …); the last repeats.
	loginSteps  []string
	stepIdx     int
	VerifyCode  string // the code need_verifycode expects
	codesIssued int
	verifyGot   []string
	statusHosts []string // host of every status poll

	msgs        []Message
	batchSize   int
	longPollMS  int
	expired     bool
	newMsg      chan struct{}
	polls       []Poll
	inFlight    int
	maxInFlight int

	sends      []Sent
	sendRet    []int // scripted ret values for sendmessage, consumed in order
	sendStatus []int // scripted HTTP statuses for sendmessage, consumed first
	typing     []Typing
	headers    []http.Header
	// Media out (ilink_upload.go).
	uploadReqs   []UploadRequest
	forgedUpload string
}

// Message is one inbound message the fake serves.
type Message struct {
	ID           int64
	From         string
	Text         string
	ContextToken string
	GroupID      string // set for a message in a group
	Type         int    // 1 user (default), 2 bot
	ItemType     int    // 1 text (default), 2 image, 3 voice
	Raw          string
	// Image, when set, adds an image item (after the text item when
	// Text is set).
	Image *ILinkImage
}

// ILinkImage is an image item: its CDN download and key.
type ILinkImage struct {
	Param  string // media.encrypt_query_param
	AESKey []byte // 16 bytes
	// KeyAsMedia sends the key as media.aes_key (base64 of its hex)
	// instead of image_item.aeskey (hex).
	KeyAsMedia bool
}

// Poll is one getupdates call.
type Poll struct {
	Cursor  string
	Replica string
	Token   string
}

// Sent is one sendmessage call.
type Sent struct {
	To           string
	Text         string
	ContextToken string
	ClientID     string
	Ret          int
	Status       int // the HTTP status answered, when one was scripted
	Replica      string
	Images       []SentImage // its image items (ilink_upload.go)
}

// Typing is one sendtyping call.
type Typing struct {
	User   string
	Status int
}

// NewILink starts a fake iLink server; Close runs at cleanup.
func NewILink(t testing.TB) *ILink {
	f := &ILink{BotID: "bot-1@im.bot", botToken: "tok-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		loginSteps: []string{"wait", "scaned", "confirmed"}, batchSize: 10, longPollMS: 500, newMsg: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.handle))
	f.redirect = httptest.NewServer(http.HandlerFunc(f.handle))
	t.Cleanup(func() {
		f.srv.Close()
		f.redirect.Close()
	})
	return f
}

// URL is the fake's base URL.
func (f *ILink) URL() string { return f.srv.URL }

// RedirectHost is the host scaned_but_redirect sends the login to.
func (f *ILink) RedirectHost() string { return strings.TrimPrefix(f.redirect.URL, "http://") }

// Token is the bot token the fake accepts (and hands out at login).
func (f *ILink) Token() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.botToken
}

// SetToken changes the bot token, as a new login does.
func (f *ILink) SetToken(tok string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.botToken = tok
}

// SetLoginSteps scripts the statuses get_qrcode_status answers, one per
// poll across every code; a poll for a superseded code answers "expired".
func (f *ILink) SetLoginSteps(steps ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loginSteps, f.stepIdx = steps, 0
}

// SetLongPoll sets longpolling_timeout_ms and how long an empty poll is held.
func (f *ILink) SetLongPoll(ms int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.longPollMS = ms
}

// SetBatchSize sets how many messages one getupdates returns at most.
func (f *ILink) SetBatchSize(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batchSize = n
}

// Add queues inbound messages.
func (f *ILink) Add(msgs ...Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range msgs {
		if m.ID == 0 {
			m.ID = int64(len(f.msgs) + 1000)
		}
		f.msgs = append(f.msgs, m)
	}
	close(f.newMsg)
	f.newMsg = make(chan struct{})
}

// Expire makes every later bot call answer errcode -14 until a new login.
func (f *ILink) Expire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expired = true
}

// ScriptSendRet makes the next sendmessage calls answer these ret values.
func (f *ILink) ScriptSendRet(rets ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sendRet = append(f.sendRet, rets...)
}

// ScriptSendStatus makes the next sendmessage calls answer these HTTP
// statuses (before any scripted ret).
func (f *ILink) ScriptSendStatus(statuses ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sendStatus = append(f.sendStatus, statuses...)
}

// ClearSendScript drops the scripted statuses and rets not yet used:
// sendmessage succeeds again.
func (f *ILink) ClearSendScript() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sendStatus, f.sendRet = nil, nil
}

// Sends returns the recorded sendmessage calls, failed ones included.
func (f *ILink) Sends() []Sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Sent(nil), f.sends...)
}

// Polls returns the recorded getupdates calls.
func (f *ILink) Polls() []Poll {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Poll(nil), f.polls...)
}

// MaxConcurrentPolls is the most getupdates calls that were open at once.
func (f *ILink) MaxConcurrentPolls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxInFlight
}

// Typings returns the recorded sendtyping calls.
func (f *ILink) Typings() []Typing {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Typing(nil), f.typing...)
}

// Headers returns the headers of every bot API call (not the login).
func (f *ILink) Headers() []http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]http.Header(nil), f.headers...)
}

// CodesIssued is how many QR codes were handed out.
func (f *ILink) CodesIssued() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.codesIssued
}

// VerifyCodes are the verify_code values the login sent.
func (f *ILink) VerifyCodes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.verifyGot...)
}

// StatusHosts are the hosts the status polls went to.
func (f *ILink) StatusHosts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.statusHosts...)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (f *ILink) handle(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch path {
	case "/ilink/bot/get_bot_qrcode":
		f.mu.Lock()
		f.codesIssued++
		n := f.codesIssued
		f.mu.Unlock()
		writeJSON(w, map[string]any{"qrcode": fmt.Sprintf("qr-%d", n), "qrcode_img_content": fmt.Sprintf("https://liteapp.weixin.qq.com/q/fake-%d", n)})
		return
	case "/ilink/bot/get_qrcode_status":
		f.loginStatus(w, r)
		return
	}
	// Bot API: check the common headers and the token.
	f.mu.Lock()
	f.headers = append(f.headers, r.Header.Clone())
	expired := f.expired
	token := f.botToken
	f.mu.Unlock()
	if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer "+token || r.Header.Get("AuthorizationType") != "ilink_bot_token" {
		writeJSON(w, map[string]any{"ret": -1, "errcode": -1, "errmsg": "bad auth"})
		return
	}
	if expired {
		writeJSON(w, map[string]any{"ret": -14, "errcode": -14, "errmsg": "session timeout"})
		return
	}
	var body map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	replica := r.Header.Get(ReplicaHeader)
	switch path {
	case "/ilink/bot/getupdates":
		var cursor string
		_ = json.Unmarshal(body["get_updates_buf"], &cursor)
		f.getUpdates(w, r, cursor, replica)
	case "/ilink/bot/sendmessage":
		f.sendMessage(w, body, replica)
	case "/ilink/bot/getuploadurl": // ilink_upload.go
		f.getUploadURL(w, body)
	case "/ilink/bot/getconfig":
		writeJSON(w, map[string]any{"ret": 0, "typing_ticket": "ticket-1"})
	case "/ilink/bot/sendtyping":
		var req struct {
			User   string `json:"ilink_user_id"`
			Ticket string `json:"typing_ticket"`
			Status int    `json:"status"`
		}
		raw, _ := json.Marshal(body)
		_ = json.Unmarshal(raw, &req)
		f.mu.Lock()
		f.typing = append(f.typing, Typing{User: req.User, Status: req.Status})
		f.mu.Unlock()
		writeJSON(w, map[string]any{"ret": 0})
	default:
		http.NotFound(w, r)
	}
}

// sendMessage records a sendmessage call and answers it, or fails it as
// the test scripted.
func (f *ILink) sendMessage(w http.ResponseWriter, body map[string]json.RawMessage, replica string) {
	var req struct {
		Msg struct {
			To       string `json:"to_user_id"`
			ClientID string `json:"client_id"`
			Items    []struct {
				Text struct {
					Text string `json:"text"`
				} `json:"text_item"`
			} `json:"item_list"`
			ContextToken string `json:"context_token"`
			MessageType  int    `json:"message_type"`
			MessageState int    `json:"message_state"`
		} `json:"msg"`
	}
	raw, _ := json.Marshal(body)
	_ = json.Unmarshal(raw, &req)
	s := Sent{To: req.Msg.To, ClientID: req.Msg.ClientID, ContextToken: req.Msg.ContextToken, Replica: replica}
	for _, it := range req.Msg.Items {
		s.Text += it.Text.Text
	}
	s.Images = sentImages(body) // ilink_upload.go
	f.mu.Lock()
	if len(f.sendStatus) > 0 {
		s.Status, f.sendStatus = f.sendStatus[0], f.sendStatus[1:]
	} else if len(f.sendRet) > 0 {
		s.Ret, f.sendRet = f.sendRet[0], f.sendRet[1:]
	}
	f.sends = append(f.sends, s)
	f.mu.Unlock()
	if s.Status != 0 {
		http.Error(w, "scripted failure", s.Status)
		return
	}
	if s.Ret != 0 {
		writeJSON(w, map[string]any{"ret": s.Ret, "errmsg": "scripted failure"})
		return
	}
	writeJSON(w, map[string]any{"ret": 0})
}

func (f *ILink) loginStatus(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statusHosts = append(f.statusHosts, r.Host)
	if v := r.URL.Query().Get("verify_code"); v != "" {
		f.verifyGot = append(f.verifyGot, v)
	}
	if r.URL.Query().Get("qrcode") != fmt.Sprintf("qr-%d", f.codesIssued) {
		writeJSON(w, map[string]any{"status": "expired"})
		return
	}
	step := f.loginSteps[min(f.stepIdx, len(f.loginSteps)-1)]
	f.stepIdx++
	switch step {
	case "confirmed":
		f.expired = false
		writeJSON(w, map[string]any{"status": "confirmed", "bot_token": f.botToken, "ilink_bot_id": f.BotID, "baseurl": f.srv.URL, "ilink_user_id": "owner@im.wechat"})
	case "scaned_but_redirect":
		writeJSON(w, map[string]any{"status": step, "redirect_host": f.RedirectHost()})
	default:
		writeJSON(w, map[string]any{"status": step})
	}
}

func (f *ILink) getUpdates(w http.ResponseWriter, r *http.Request, cursor, replica string) {
	f.mu.Lock()
	f.polls = append(f.polls, Poll{Cursor: cursor, Replica: replica})
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	hold := time.Duration(f.longPollMS) * time.Millisecond
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	start := 0
	if strings.HasPrefix(cursor, "c") {
		start, _ = strconv.Atoi(cursor[1:])
	}
	deadline := time.After(hold)
	for {
		f.mu.Lock()
		if f.expired {
			f.mu.Unlock()
			writeJSON(w, map[string]any{"ret": -14, "errcode": -14, "errmsg": "session timeout"})
			return
		}
		if start < len(f.msgs) {
			end := min(len(f.msgs), start+f.batchSize)
			var out []json.RawMessage
			for _, m := range f.msgs[start:end] {
				out = append(out, m.wire(f.BotID))
			}
			f.mu.Unlock()
			writeJSON(w, map[string]any{"ret": 0, "msgs": out, "get_updates_buf": fmt.Sprintf("c%d", end), "longpolling_timeout_ms": f.longPollMS})
			return
		}
		wake := f.newMsg
		f.mu.Unlock()
		select {
		case <-wake:
			continue
		case <-deadline:
		case <-r.Context().Done():
			return
		}
		writeJSON(w, map[string]any{"ret": 0, "msgs": []any{}, "get_updates_buf": cursor, "longpolling_timeout_ms": f.longPollMS})
		return
	}
}

// Wire is m as getupdates delivers it to bot.
func (m Message) Wire(bot string) json.RawMessage { return m.wire(bot) }

func (m Message) wire(bot string) json.RawMessage {
	if m.Raw != "" {
		return json.RawMessage(m.Raw)
	}
	typ := m.Type
	if typ == 0 {
		typ = 1
	}
	item := map[string]any{"type": 1, "text_item": map[string]string{"text": m.Text}}
	switch m.ItemType {
	case 2:
		item = map[string]any{"type": 2, "image_item": map[string]string{"url": "x"}}
	case 3:
		item = map[string]any{"type": 3, "voice_item": map[string]string{"text": m.Text}}
	}
	items := []any{item}
	if m.Image != nil {
		img := map[string]any{"media": map[string]string{"encrypt_query_param": m.Image.Param}}
		hexKey := hex.EncodeToString(m.Image.AESKey)
		if m.Image.KeyAsMedia {
			img["media"] = map[string]string{"encrypt_query_param": m.Image.Param, "aes_key": base64.StdEncoding.EncodeToString([]byte(hexKey))}
		} else {
			img["aeskey"] = hexKey
		}
		imgItem := map[string]any{"type": 2, "image_item": img}
		if m.Text == "" {
			items = []any{imgItem}
		} else {
			items = append(items, imgItem)
		}
	}
	raw, _ := json.Marshal(map[string]any{
		"message_id": m.ID, "from_user_id": m.From, "to_user_id": bot, "create_time_ms": time.Now().UnixMilli(),
		"message_type": typ, "item_list": items, "context_token": m.ContextToken, "group_id": m.GroupID,
	})
	return raw
}
