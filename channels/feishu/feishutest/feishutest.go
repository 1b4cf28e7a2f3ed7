// Package feishutest runs a fake Feishu Open API for tests: the tenant
// token, the bot's identity, replies, messages and reactions (recorded),
// the long-connection endpoint and a WebSocket that pushes events as
// protobuf frames the way Feishu does, and lists messages back
// (history.go). It also builds events, encrypted
// and signed callback bodies.
package feishutest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/parleyhq/parley/channels/feishu/internal/wsproto"
)

// BotOpenID is the fake bot's own open_id.
const BotOpenID = "ou_bot"

// Sent is one message the code under test sent.
type Sent struct {
	Kind          string // "reply" or "create"
	ReplyTo       string // the message replied to
	ChatID        string // receive_id of a create
	MsgType       string
	Content       string
	UUID          string
	ReplyInThread bool
	// Text is the card's markdown or the text message's text (for a card
	// entity, its text once streaming ended).
	Text string
	// MessageID is the id the fake gave the message; CardID the card
	// entity it carries, if any.
	MessageID, CardID string
	At                time.Time // when the fake received it
}

// Reaction is one reaction added (and maybe removed).
type Reaction struct {
	MessageID string
	Emoji     string
	ID        string
	Removed   bool
}

// Failure scripts an answer of the fake API.
type Failure struct {
	Status int // default 400
	Code   int
	Msg    string
	// Reset is the x-ogw-ratelimit-reset header (seconds) a rate limit
	// answers with, or "".
	Reset string
}

// Server is the fake. Its zero value is not usable; call New.
type Server struct {
	URL string

	srv *httptest.Server

	mu          sync.Mutex
	sent        []Sent
	uuids       map[string]string // uuid → the message it made
	duplicates  int
	reactions   []Reaction
	tokens      int
	botInfo     int
	endpoints   int
	fail        map[string][]Failure // by op: reply, create, reaction, bot_info, endpoint
	attempts    map[string]int       // message calls by op (reply, create), failed ones included
	refuseCards bool
	conns       map[*wsPeer]bool
	connCh      chan struct{}
	frameSeq    uint64
	closed      bool
	media       media // message resources (media.go)

	// CardKit, edits and recalls (cardkit.go).
	calls         []Call
	cards         map[string]*Card
	cardOrder     []string
	msgs          []*msgState
	msgIndex      map[string]*msgState
	refuseCardKit bool

	hist chatHistory // the message list and contacts (history.go)

	apps   []App             // apps besides the default (apps.go)
	sentBy map[string]string // message id → the bot of the app that sent it

	up uploads // images and files uploaded, answers dropped (upload.go)
}

type wsPeer struct {
	app     string // the app id that asked for the endpoint (apps.go)
	conn    *websocket.Conn
	wmu     sync.Mutex
	mu      sync.Mutex
	waiting map[string]chan wsproto.Response // message_id → the client's answer
	pings   int
}

// New starts the fake; it stops at test cleanup.
func New(t testing.TB) *Server {
	s := &Server{uuids: map[string]string{}, fail: map[string][]Failure{}, attempts: map[string]int{}, conns: map[*wsPeer]bool{}, connCh: make(chan struct{}, 16),
		cards: map[string]*Card{}, msgIndex: map[string]*msgState{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close drops the long connections and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	peers := s.peersLocked()
	s.mu.Unlock()
	for _, p := range peers {
		p.conn.Close()
	}
	s.srv.CloseClientConnections()
	s.srv.Close()
}

func (s *Server) peersLocked() []*wsPeer {
	var out []*wsPeer
	for p := range s.conns {
		out = append(out, p)
	}
	return out
}

// Fail makes the next calls of op fail, in order.
func (s *Server) Fail(op string, f ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[op] = append(s.fail[op], f...)
}

// Heal drops the failures still scripted for op.
func (s *Server) Heal(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.fail, op)
}

// Attempts is the number of message calls of op (reply or create) the
// fake received, failed ones included.
func (s *Server) Attempts(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts[op]
}

// RefuseCards makes every interactive message fail with code 230099.
func (s *Server) RefuseCards(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuseCards = on
}

// Sent lists the messages accepted, in order (duplicates by uuid dropped).
// A message carrying a card entity is listed once its card has left
// streaming mode, with the card's text then: a live reply counts when it
// is complete, as a message sent whole does.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sent
	for _, m := range s.sent {
		if c := s.cards[m.CardID]; c != nil {
			if c.Streaming {
				continue
			}
			m.Text = c.Text()
		}
		out = append(out, m)
	}
	return out
}

// Duplicates counts sends dropped because their uuid was seen before.
func (s *Server) Duplicates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.duplicates
}

// Reactions lists the reactions added.
func (s *Server) Reactions() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Reaction(nil), s.reactions...)
}

// TokenRequests counts tenant_access_token requests.
func (s *Server) TokenRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens
}

// BotInfoRequests counts GET /open-apis/bot/v3/info.
func (s *Server) BotInfoRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.botInfo
}

// EndpointRequests counts POST /callback/ws/endpoint.
func (s *Server) EndpointRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endpoints
}

// Connections counts the open long connections.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) takeFailure(op string) (Failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.fail[op]
	if len(q) == 0 {
		return Failure{}, false
	}
	s.fail[op] = q[1:]
	return q[0], true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Tt-Logid", "fake-log-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeFailure(w http.ResponseWriter, f Failure) {
	if f.Status == 0 {
		f.Status = http.StatusBadRequest
	}
	if f.Msg == "" {
		f.Msg = "scripted failure"
	}
	if f.Reset != "" {
		w.Header().Set("x-ogw-ratelimit-reset", f.Reset)
	}
	writeJSON(w, f.Status, map[string]any{"code": f.Code, "msg": f.Msg, "error": map[string]string{"log_id": "fake-failure-log"}})
}

func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if _, ok := s.botOf(r); !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"code": 99991663, "msg": "invalid tenant token"})
		return false
	}
	return true
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if s.dropAnswer(w, r) { // upload.go
		return
	}
	path := r.URL.Path
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method == http.MethodPost && path == "/open-apis/auth/v3/tenant_access_token/internal":
		s.mu.Lock()
		s.tokens++
		s.mu.Unlock()
		token := s.tokenFor(body)
		if token == "" {
			writeJSON(w, 200, map[string]any{"code": 10014, "msg": "app secret invalid"})
			return
		}
		writeJSON(w, 200, map[string]any{"code": 0, "msg": "ok", "tenant_access_token": token, "expire": 7200})
	case r.Method == http.MethodGet && path == "/open-apis/bot/v3/info":
		s.mu.Lock()
		s.botInfo++
		s.mu.Unlock()
		if f, ok := s.takeFailure("bot_info"); ok {
			writeFailure(w, f)
			return
		}
		if !s.authorized(w, r) {
			return
		}
		bot, _ := s.botOf(r)
		writeJSON(w, 200, map[string]any{"code": 0, "msg": "ok", "bot": map[string]any{"activate_status": 2, "app_name": "Parley", "open_id": bot}})
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/open-apis/im/v1/messages/") && strings.HasSuffix(path, "/reply"):
		s.message(w, r, "reply", strings.TrimSuffix(strings.TrimPrefix(path, "/open-apis/im/v1/messages/"), "/reply"), body)
	case r.Method == http.MethodPost && path == "/open-apis/im/v1/messages":
		s.message(w, r, "create", "", body)
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/open-apis/im/v1/messages/") && strings.HasSuffix(path, "/reactions"):
		if !s.authorized(w, r) {
			return
		}
		if f, ok := s.takeFailure("reaction"); ok {
			writeFailure(w, f)
			return
		}
		var req struct {
			ReactionType struct {
				EmojiType string `json:"emoji_type"`
			} `json:"reaction_type"`
		}
		_ = json.Unmarshal(body, &req)
		s.mu.Lock()
		id := fmt.Sprintf("r%d", len(s.reactions)+1)
		s.reactions = append(s.reactions, Reaction{MessageID: strings.Split(strings.TrimPrefix(path, "/open-apis/im/v1/messages/"), "/")[0], Emoji: req.ReactionType.EmojiType, ID: id})
		s.mu.Unlock()
		writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"reaction_id": id}})
	case r.Method == http.MethodDelete && strings.Contains(path, "/reactions/"):
		if !s.authorized(w, r) {
			return
		}
		id := path[strings.LastIndex(path, "/")+1:]
		s.mu.Lock()
		for i := range s.reactions {
			if s.reactions[i].ID == id {
				s.reactions[i].Removed = true
			}
		}
		s.mu.Unlock()
		writeJSON(w, 200, map[string]any{"code": 0, "msg": "success"})
	case isResource(r.Method, path):
		s.serveResource(w, r)
	case r.Method == http.MethodPost && path == wsproto.GenEndpointUri:
		s.mu.Lock()
		s.endpoints++
		s.mu.Unlock()
		if f, ok := s.takeFailure("endpoint"); ok {
			writeJSON(w, 200, map[string]any{"code": f.Code, "msg": f.Msg})
			return
		}
		var app struct{ AppID string }
		_ = json.Unmarshal(body, &app)
		wsURL := "ws" + strings.TrimPrefix(s.URL, "http") + "/ws?device_id=dev1&service_id=7&app=" + url.QueryEscape(app.AppID)
		writeJSON(w, 200, map[string]any{"code": 0, "msg": "ok", "data": map[string]any{
			"URL": wsURL, "ClientConfig": map[string]int{"PingInterval": 120, "ReconnectCount": -1, "ReconnectInterval": 1, "ReconnectNonce": 0}}})
	case path == "/ws":
		s.acceptWS(w, r)
	default:
		if s.serveCardKit(w, r, body) || s.serveHistory(w, r) || s.serveUpload(w, r, body) { // upload.go
			return
		}
		writeJSON(w, 404, map[string]any{"code": 404, "msg": "not found: " + r.Method + " " + path})
	}
}

func (s *Server) message(w http.ResponseWriter, r *http.Request, kind, replyTo string, body []byte) {
	if !s.authorized(w, r) {
		return
	}
	s.mu.Lock()
	s.attempts[kind]++
	s.mu.Unlock()
	if f, ok := s.takeFailure(kind); ok {
		writeFailure(w, f)
		return
	}
	var req struct {
		ReceiveID     string `json:"receive_id"`
		MsgType       string `json:"msg_type"`
		Content       string `json:"content"`
		UUID          string `json:"uuid"`
		ReplyInThread bool   `json:"reply_in_thread"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, 400, map[string]any{"code": 230001, "msg": "bad body"})
		return
	}
	if kind == "create" && r.URL.Query().Get("receive_id_type") != "chat_id" {
		writeJSON(w, 400, map[string]any{"code": 99992402, "msg": "receive_id_type missing"})
		return
	}
	bot, _ := s.botOf(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuseCards && req.MsgType == "interactive" {
		writeJSON(w, 400, map[string]any{"code": 230099, "msg": "Failed to create card content"})
		return
	}
	if !s.knownKey(req.MsgType, req.Content) { // upload.go
		writeJSON(w, 400, map[string]any{"code": 230001, "msg": "invalid image_key or file_key"})
		return
	}
	// Feishu keeps a uuid per app: two apps may answer one message.
	uuid := bot + "|" + req.UUID
	if prev, ok := s.uuids[uuid]; ok && req.UUID != "" {
		// Feishu answers a repeated uuid with the message it made.
		s.duplicates++
		writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"message_id": prev}})
		return
	}
	cardID, multi := sentCard(req.MsgType, req.Content)
	card := s.cards[cardID]
	if cardID != "" && (card == nil || card.MessageID != "") {
		// A card entity is sent once.
		writeJSON(w, 400, map[string]any{"code": 230099, "msg": "Failed to create card content: card entity not found or already sent"})
		return
	}
	id := fmt.Sprintf("om_sent_%d", len(s.sent)+1)
	s.uuids[uuid] = id
	if s.sentBy == nil {
		s.sentBy = map[string]string{}
	}
	s.sentBy[id] = bot
	sent := Sent{Kind: kind, ReplyTo: replyTo, ChatID: req.ReceiveID, MsgType: req.MsgType, Content: req.Content, UUID: req.UUID,
		ReplyInThread: req.ReplyInThread, MessageID: id, CardID: cardID, At: time.Now()}
	sent.Text = contentText(req.MsgType, req.Content)
	if card != nil {
		card.MessageID = id
		sent.Text = card.Text()
	}
	s.sent = append(s.sent, sent)
	ms := &msgState{id: id, msgType: req.MsgType, text: sent.Text, cardID: cardID, multi: multi, replyTo: replyTo, chatID: req.ReceiveID, inThread: req.ReplyInThread}
	s.msgs = append(s.msgs, ms)
	s.msgIndex[id] = ms
	writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"message_id": id}})
}

// contentText extracts the readable text of a sent message.
func contentText(msgType, content string) string {
	switch msgType {
	case "text":
		var t struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal([]byte(content), &t)
		return t.Text
	case "interactive":
		return cardText(content)
	}
	return content
}
