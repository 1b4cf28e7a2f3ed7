// Package slacktest is a fake Slack for tests: a Web API (auth.test,
// chat.postMessage, reactions.add/remove, apps.connections.open,
// conversations.replies and conversations.history (thread.go), users.info
// and the messages other people wrote (history.go), and the
// methods of a live reply: chat.startStream/appendStream/stopStream,
// chat.update, chat.delete, assistant.threads.setStatus; see live.go), a
// response_url endpoint for slash command answers, and a Socket Mode
// WebSocket endpoint, all on one httptest server. Point the adapter at
// APIURL(); every call is recorded, failures can be scripted, and signed
// Events API requests can be built with Signed.
package slacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Identity of the fake workspace.
const (
	TeamID    = "T0PARLEY"
	BotUserID = "UBOT"
	BotID     = "BBOT"
	BotToken  = "xoxb-test-token"
	AppToken  = "xapp-test-token"
	Secret    = "8f742231b10e8888abcd99yyyzzz85a5"
)

// Post is one chat.postMessage (or response_url) call.
type Post struct {
	Channel  string
	Text     string
	ThreadTS string
	TS       string // the ts the fake gave the posted message
	// At is when the fake received the post, for checks of the pace of
	// posting.
	At time.Time
	// ResponseURL is set for a post to a slash command's response_url,
	// with ResponseType (ephemeral, in_channel).
	ResponseURL  string
	ResponseType string
	// Blocks is the post's Block Kit blocks as sent (JSON), if any;
	// ReplaceOriginal marks a response_url post that replaces the message
	// it answers (interactive.go).
	Blocks          string
	ReplaceOriginal bool
	// EphemeralTo is the user a chat.postEphemeral was shown to.
	EphemeralTo string
}

// Reaction is one reactions.add or reactions.remove call.
type Reaction struct {
	Method    string // reactions.add or reactions.remove
	Channel   string
	Timestamp string
	Name      string
}

// Failure scripts the answer to one call of a method: an HTTP status
// (with Retry-After when set) or an ok:false error.
type Failure struct {
	Status     int
	RetryAfter string
	Error      string
	// Pass lets the call through as if no failure were scripted, so that
	// a failure can be scripted after some successes.
	Pass bool
	// Bare answers {"ok": true} and nothing else, doing nothing: an answer
	// without the fields the method returns (a ts), as a broken proxy or
	// a Slack-compatible API may give.
	Bare bool
	// Written makes the call take effect (the message is posted, the
	// stream started) before it is answered with Status or Hang: Slack
	// wrote it and the answer to the caller was lost (thread.go).
	Written bool
	// Hang gives no answer at all until the caller gives up (its
	// timeout, its context).
	Hang bool
}

// Server is the fake Slack.
type Server struct {
	srv *httptest.Server
	t   testing.TB

	mu        sync.Mutex
	calls     []string // methods in arrival order
	posts     []Post
	updates   []Update
	reactions []Reaction
	failures  map[string][]Failure
	nextTS    int
	conns     []*wsConn
	opened    int // apps.connections.open calls
	acks      []json.RawMessage
	closed    bool
	groupDMs  map[string]bool   // channel ids conversations.info calls is_mpim
	refused   map[string]string // method → the error every call of it gets
	messages  []*Msg            // every message made, in order (live.go)
	log       []Call            // the calls of a live reply's methods (live.go)
	files     fileStore         // files served under /files/ (files.go)
	lookups   []Lookup          // conversations.replies and .history calls (thread.go)
	history                     // what others wrote, users.info (history.go)
	apps      []App             // apps besides DefaultApp (apps.go)
	revoked   map[string]bool   // bot tokens revoked (apps.go)
	madeBy    map[string]string // ts → the bot user that made the message (apps.go)
	uploads   uploadState       // files uploaded and shared (upload.go)
}

type wsConn struct {
	mu   sync.Mutex // serialises writes
	conn *websocket.Conn
	app  string // the bot user of the app whose app token opened it (apps.go)
}

// New starts a fake Slack, stopped at cleanup.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, failures: map[string][]Failure{}, nextTS: 1}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.api)
	mux.HandleFunc("/response/", s.response)
	mux.HandleFunc("/socket", s.socket)
	mux.HandleFunc("/files/", s.serveFile)
	mux.HandleFunc("/upload/v1/", s.serveUpload) // upload.go
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// APIURL is the value for SLACK_API_URL.
func (s *Server) APIURL() string { return s.srv.URL + "/api/" }

// ResponseURL is a response_url for a slash command that posts here.
func (s *Server) ResponseURL(id string) string { return s.srv.URL + "/response/" + id }

// Close ends every socket connection and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	conns := s.conns
	s.mu.Unlock()
	for _, c := range conns {
		c.conn.Close()
	}
	s.srv.Close()
}

// Fail scripts the next calls of method to fail, in order.
func (s *Server) Fail(method string, f ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], f...)
}

// Heal drops the failures still scripted for method, and its refusal:
// the platform has recovered.
func (s *Server) Heal(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.failures, method)
	delete(s.refused, method)
}

// Refuse makes every call of method, from now until Heal, answer ok:false
// with code (unknown_method, not_allowed, missing_scope, …), as a
// workspace refuses a method it does not offer or allow. Failures
// scripted with Fail come first.
func (s *Server) Refuse(method, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused == nil {
		s.refused = map[string]string{}
	}
	s.refused[method] = code
}

// Calls lists the Web API methods called, in order.
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// SetGroupDMs makes conversations.info describe the channels ids as group
// DMs (is_mpim); every other channel is a channel.
func (s *Server) SetGroupDMs(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groupDMs = map[string]bool{}
	for _, id := range ids {
		s.groupDMs[id] = true
	}
}

// Count reports how many times method was called.
func (s *Server) Count(method string) int {
	n := 0
	for _, c := range s.Calls() {
		if c == method {
			n++
		}
	}
	return n
}

// Posts lists the messages posted successfully, in order: chat.postMessage
// and response_url posts, and each streamed message once its stream is
// stopped. Each shows its text as it stands now (a message edited with
// chat.update shows its last text; a streamed one its whole text). A
// message since deleted is left out. Messages tells more of each.
func (s *Server) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	byTS := map[string]*Msg{}
	for _, m := range s.messages {
		byTS[m.TS] = m
	}
	var out []Post
	for _, p := range s.posts {
		if m := byTS[p.TS]; p.TS != "" && m != nil {
			if m.Deleted {
				continue
			}
			p.Text = m.Text
		}
		out = append(out, p)
	}
	return out
}

// Reactions lists the successful reaction calls, in order.
func (s *Server) Reactions() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Reaction(nil), s.reactions...)
}

// WaitFor polls cond until it holds or the deadline passes.
func WaitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	params, token := apiParams(r)
	fail := s.failureFor(method)
	app, known, revoked := s.appOf(method, token)
	if !known {
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	if revoked {
		writeJSON(w, map[string]any{"ok": false, "error": "token_revoked"})
		return
	}
	params.Set(paramBy, app.BotUserID)
	if fail != nil && fail.Bare {
		writeJSON(w, map[string]any{"ok": true})
		return
	}
	if fail != nil && (fail.Written || fail.Hang) {
		s.lost(w, r, method, params, *fail) // thread.go
		return
	}
	if fail != nil {
		if fail.Status != 0 {
			if fail.RetryAfter != "" {
				w.Header().Set("Retry-After", fail.RetryAfter)
			}
			w.WriteHeader(fail.Status)
			return
		}
		writeJSON(w, map[string]any{"ok": false, "error": fail.Error})
		return
	}
	s.answer(w, method, params)
}

// answer answers a call of method that is not scripted to fail.
func (s *Server) answer(w http.ResponseWriter, method string, params url.Values) {
	if s.blocks(w, method, params) { // interactive.go
		return
	}
	if s.thread(w, method, params) { // thread.go
		return
	}
	if s.userInfo(w, method, params) { // history.go
		return
	}
	if s.upload(w, method, params) { // upload.go
		return
	}
	switch method {
	case "auth.test":
		app := DefaultApp
		for _, a := range s.appsNow() {
			if a.BotUserID == params.Get(paramBy) {
				app = a
			}
		}
		writeJSON(w, map[string]any{"ok": true, "url": "https://parley.slack.com/", "team": "Parley", "user": "parley",
			"team_id": TeamID, "user_id": app.BotUserID, "bot_id": app.BotID})
	case "chat.postMessage":
		s.postMessage(w, method, params)
	case "conversations.info":
		id := params.Get("channel")
		s.mu.Lock()
		mpim := s.groupDMs[id]
		s.mu.Unlock()
		writeJSON(w, map[string]any{"ok": true, "channel": map[string]any{
			"id": id, "is_mpim": mpim, "is_im": strings.HasPrefix(id, "D"), "is_channel": !mpim && !strings.HasPrefix(id, "D"),
		}})
	case "reactions.add", "reactions.remove":
		s.mu.Lock()
		s.reactions = append(s.reactions, Reaction{Method: method, Channel: params.Get("channel"), Timestamp: params.Get("timestamp"), Name: params.Get("name")})
		s.mu.Unlock()
		writeJSON(w, map[string]any{"ok": true})
	case "apps.connections.open":
		s.mu.Lock()
		s.opened++
		n := s.opened
		s.mu.Unlock()
		writeJSON(w, map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/socket?n=" + strconv.Itoa(n) + "&app=" + url.QueryEscape(params.Get(paramBy))})
	default:
		if !s.live(w, method, params) {
			writeJSON(w, map[string]any{"ok": false, "error": "unknown_method"})
		}
	}
}

// apiParams reads a Web API call's parameters (a form or a JSON body) and
// its token (the Authorization header or the token parameter).
func apiParams(r *http.Request) (url.Values, string) {
	var params url.Values
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var m map[string]any
		json.NewDecoder(r.Body).Decode(&m)
		params = url.Values{}
		for k, v := range m {
			params.Set(k, fmt.Sprint(v))
		}
	} else {
		r.ParseForm()
		params = r.Form
	}
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token == "" {
		token = params.Get("token")
	}
	return params, token
}

// failureFor records a call of method and returns the failure it is to
// answer, if any: the next one queued for it, or its standing refusal.
func (s *Server) failureFor(method string) *Failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, method)
	var fail *Failure
	if fs := s.failures[method]; len(fs) > 0 {
		fail = &fs[0]
		s.failures[method] = fs[1:]
		if fail.Pass {
			fail = nil
		}
	} else if code, ok := s.refused[method]; ok {
		fail = &Failure{Error: code}
	}
	return fail
}

// postMessage is chat.postMessage: the message is recorded and gets the
// next ts.
func (s *Server) postMessage(w http.ResponseWriter, method string, params url.Values) {
	if params.Get("text") == "" {
		writeJSON(w, map[string]any{"ok": false, "error": "no_text"})
		return
	}
	s.mu.Lock()
	ts := fmt.Sprintf("1800000000.%06d", s.nextTS)
	s.nextTS++
	now := time.Now()
	s.posts = append(s.posts, Post{Channel: params.Get("channel"), Text: params.Get("text"), ThreadTS: params.Get("thread_ts"), TS: ts, At: now})
	s.messages = append(s.messages, &Msg{Channel: params.Get("channel"), ThreadTS: params.Get("thread_ts"), TS: ts, Text: params.Get("text"), At: now,
		Metadata: params.Get("metadata")})
	s.made(ts, params)
	s.log = append(s.log, Call{Method: method, Channel: params.Get("channel"), TS: ts, Text: params.Get("text"), At: now})
	s.mu.Unlock()
	writeJSON(w, map[string]any{"ok": true, "channel": params.Get("channel"), "ts": ts})
}

func (s *Server) response(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		Text            string          `json:"text"`
		ResponseType    string          `json:"response_type"`
		ThreadTS        string          `json:"thread_ts"`
		Blocks          json.RawMessage `json:"blocks"`
		ReplaceOriginal bool            `json:"replace_original"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		http.Error(w, "invalid_payload", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.calls = append(s.calls, "response_url")
	s.posts = append(s.posts, Post{Text: msg.Text, ThreadTS: msg.ThreadTS, ResponseURL: r.URL.Path, ResponseType: msg.ResponseType,
		Blocks: blocksOf(msg.Blocks), ReplaceOriginal: msg.ReplaceOriginal})
	s.mu.Unlock()
	writeJSON(w, map[string]any{"ok": true})
}
