package feishutest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Reading a chat back, as the Open API answers it:
//
//   - GET /open-apis/im/v1/messages lists a container's messages:
//     container_id_type chat (container_id a chat_id: the messages outside
//     threads) or thread (an omt_ thread id: its messages);
//     start_time/end_time (seconds, inclusive; chat only, a thread
//     refuses them with 230001); sort_type ByCreateTimeAsc (default) or
//     ByCreateTimeDesc; page_size 1–50 (default 20; more is refused with
//     99992402); page_token from the previous page's answer. Each item
//     has message_id, root_id, parent_id, thread_id, msg_type,
//     create_time (ms), chat_id, sender {id, id_type, sender_type},
//     body.content and mentions [{key, id, id_type, name}].
//   - GET /open-apis/contact/v3/users/:user_id?user_id_type=open_id
//     answers data.user.name for a user AddUser described, and code 41050
//     (outside the app's contact range) for anyone else.
//
// Failures are scripted with Fail("list", …) and Fail("contact", …): a
// rate limit is {Status: 400, Code: 99991400}, a missing permission
// {Code: 230027} or {Code: 99991672}. Every call is recorded (Listings,
// ContactLookups).

// Listing is one GET /open-apis/im/v1/messages, its query as sent.
type Listing struct {
	Query url.Values
}

// Said is a message of the history: someone's (Say) or an app's (SayAsApp).
type Said struct {
	ID, ChatID, ThreadID string
	SenderID, SenderType string // open_id and "user", or app_id and "app"
	MsgType, Content     string
	CreateMS             int64
	Deleted              bool
	Mentions             []SaidMention
}

// SaidMention is a mention in a message of the history.
type SaidMention struct {
	Key, OpenID, Name string
}

// chatHistory is the part of Server that holds the history.
type chatHistory struct {
	said     []Said
	clockMS  int64
	listings []Listing
	people   map[string]string // open_id → name
	contacts []string
}

// BaseMS is the create_time of the first message Say writes; each later
// one is a second after the one before.
const BaseMS = 1_700_000_000_000

func (s *Server) add(m Said) Said {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hist.clockMS == 0 {
		s.hist.clockMS = BaseMS
	}
	if m.CreateMS == 0 {
		m.CreateMS = s.hist.clockMS
		s.hist.clockMS += 1000
	}
	m.ID = fmt.Sprintf("om_said_%d", len(s.hist.said)+1)
	s.hist.said = append(s.hist.said, m)
	return m
}

// Say adds a text message openID wrote in chat (in thread, "" for none)
// and returns it (its ID and CreateMS).
func (s *Server) Say(chat, thread, openID, text string, mentions ...SaidMention) Said {
	c, _ := json.Marshal(map[string]string{"text": text})
	return s.add(Said{ChatID: chat, ThreadID: thread, SenderID: openID, SenderType: "user", MsgType: "text", Content: string(c), Mentions: mentions})
}

// SayContent adds a message of any type with its content JSON as given.
func (s *Server) SayContent(chat, thread, openID, msgType, content string) Said {
	return s.add(Said{ChatID: chat, ThreadID: thread, SenderID: openID, SenderType: "user", MsgType: msgType, Content: content})
}

// SayAsApp adds a text message of the app appID (the bot's own answers
// carry the app's app_id as sender).
func (s *Server) SayAsApp(chat, thread, appID, text string) Said {
	c, _ := json.Marshal(map[string]string{"text": text})
	return s.add(Said{ChatID: chat, ThreadID: thread, SenderID: appID, SenderType: "app", MsgType: "text", Content: string(c)})
}

// AddUser makes the contact API name openID.
func (s *Server) AddUser(openID, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hist.people == nil {
		s.hist.people = map[string]string{}
	}
	s.hist.people[openID] = name
}

// Listings lists the message-list calls, in order.
func (s *Server) Listings() []Listing {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Listing(nil), s.hist.listings...)
}

// ContactLookups lists the open_ids the contact API was asked for.
func (s *Server) ContactLookups() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.hist.contacts...)
}

// serveHistory answers the message list and the contact lookup; false
// for any other request.
func (s *Server) serveHistory(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/open-apis/im/v1/messages":
		if s.authorized(w, r) {
			s.list(w, r.URL.Query())
		}
		return true
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/open-apis/contact/v3/users/"):
		if s.authorized(w, r) {
			s.contact(w, strings.TrimPrefix(r.URL.Path, "/open-apis/contact/v3/users/"), r.URL.Query())
		}
		return true
	}
	return false
}

func (s *Server) list(w http.ResponseWriter, q url.Values) {
	s.mu.Lock()
	s.hist.listings = append(s.hist.listings, Listing{Query: q})
	s.mu.Unlock()
	if f, ok := s.takeFailure("list"); ok {
		writeFailure(w, f)
		return
	}
	kind, id := q.Get("container_id_type"), q.Get("container_id")
	size := 20
	if v := q.Get("page_size"); v != "" {
		size, _ = strconv.Atoi(v)
	}
	switch {
	case kind != "chat" && kind != "thread" || id == "":
		writeJSON(w, 400, map[string]any{"code": 230001, "msg": "invalid container"})
		return
	case kind == "thread" && (q.Get("start_time") != "" || q.Get("end_time") != ""):
		writeJSON(w, 400, map[string]any{"code": 230001, "msg": "a thread container takes no time range"})
		return
	case size < 1 || size > 50:
		writeJSON(w, 400, map[string]any{"code": 99992402, "msg": "page_size must be 1-50"})
		return
	}
	items := s.listed(kind, id, q)
	offset, _ := strconv.Atoi(strings.TrimPrefix(q.Get("page_token"), "p"))
	page, next := items[min(offset, len(items)):], ""
	if len(page) > size {
		page, next = page[:size], "p"+strconv.Itoa(offset+size)
	}
	out := make([]map[string]any, 0, len(page))
	for _, m := range page {
		out = append(out, m.wire())
	}
	writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]any{
		"has_more": next != "", "page_token": next, "items": out}})
}

// listed is what a list call lists, in its order.
func (s *Server) listed(kind, id string, q url.Values) []Said {
	start, _ := strconv.ParseInt(q.Get("start_time"), 10, 64)
	end, _ := strconv.ParseInt(q.Get("end_time"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Said
	for _, m := range s.hist.said {
		in := kind == "chat" && m.ChatID == id && m.ThreadID == "" || kind == "thread" && m.ThreadID == id
		sec := m.CreateMS / 1000
		if !in || q.Get("start_time") != "" && sec < start || q.Get("end_time") != "" && sec > end {
			continue
		}
		out = append(out, m)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreateMS < out[j].CreateMS })
	if q.Get("sort_type") == "ByCreateTimeDesc" {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

func (m Said) wire() map[string]any {
	idType := "open_id"
	if m.SenderType == "app" {
		idType = "app_id"
	}
	mentions := make([]map[string]any, 0, len(m.Mentions))
	for _, mn := range m.Mentions {
		mentions = append(mentions, map[string]any{"key": mn.Key, "id": mn.OpenID, "id_type": "open_id", "name": mn.Name})
	}
	item := map[string]any{"message_id": m.ID, "msg_type": m.MsgType, "create_time": strconv.FormatInt(m.CreateMS, 10),
		"update_time": strconv.FormatInt(m.CreateMS, 10), "deleted": m.Deleted, "updated": false, "chat_id": m.ChatID,
		"sender":   map[string]any{"id": m.SenderID, "id_type": idType, "sender_type": m.SenderType, "tenant_key": "tenant"},
		"body":     map[string]any{"content": m.Content},
		"mentions": mentions}
	if m.ThreadID != "" {
		item["thread_id"] = m.ThreadID
	}
	return item
}

func (s *Server) contact(w http.ResponseWriter, id string, q url.Values) {
	s.mu.Lock()
	s.hist.contacts = append(s.hist.contacts, id)
	name, ok := s.hist.people[id]
	s.mu.Unlock()
	if f, failed := s.takeFailure("contact"); failed {
		writeFailure(w, f)
		return
	}
	if q.Get("user_id_type") != "open_id" || !ok {
		writeJSON(w, 400, map[string]any{"code": 41050, "msg": "no user authority error"})
		return
	}
	writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"user": map[string]any{
		"open_id": id, "name": name, "en_name": name}}})
}
