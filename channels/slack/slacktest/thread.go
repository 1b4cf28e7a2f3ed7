package slacktest

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Reading a thread back, as Slack's Web API answers it:
//
//   - conversations.replies (channel, ts, oldest, inclusive, limit,
//     cursor, include_all_metadata) lists the messages of the thread ts,
//     oldest first;
//   - conversations.history (the same but ts) lists the channel's
//     top-level messages, newest first;
//   - latest bounds both from above (exclusive unless inclusive), as
//     oldest does from below; but conversations.replies lists the
//     thread's parent first whatever the bounds, as Slack does.
//
// Both list the bot's own messages and those people wrote (Say, in
// history.go), each with its author as Slack gives it.
//
// Both page: at most limit messages (default 100, at most 1000) a call,
// with response_metadata.next_cursor naming the next page. A message's
// metadata (event_type, event_payload) is in the answer only with
// include_all_metadata. Deleted messages are not listed. Each call is
// recorded (Lookups).
//
// A Failure with Written or Hang scripts the case these are read for: the
// call took effect and its answer was lost (a 5xx after the write, or no
// answer until the caller gives up).

// Lookup is one conversations.replies or conversations.history call.
type Lookup struct {
	Method   string
	Channel  string
	TS       string // the thread (replies)
	Oldest   string
	Latest   string
	Limit    int // as asked (0: not given)
	Cursor   string
	Metadata bool // include_all_metadata
}

// Lookups lists the calls that read a thread or channel back, in order.
func (s *Server) Lookups() []Lookup {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Lookup(nil), s.lookups...)
}

// lost answers a call scripted as Written or Hang: the call takes effect
// (Written) and then its answer is f's status, or none (Hang) until the
// caller gives up.
func (s *Server) lost(w http.ResponseWriter, r *http.Request, method string, params url.Values, f Failure) {
	if f.Written {
		s.answer(httptest.NewRecorder(), method, params)
	}
	if f.Hang {
		<-r.Context().Done()
		return
	}
	status := f.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	w.WriteHeader(status)
}

// thread answers conversations.replies and conversations.history; false
// for any other method.
func (s *Server) thread(w http.ResponseWriter, method string, p url.Values) bool {
	if method != "conversations.replies" && method != "conversations.history" {
		return false
	}
	l := Lookup{Method: method, Channel: p.Get("channel"), TS: p.Get("ts"), Oldest: p.Get("oldest"), Latest: p.Get("latest"), Cursor: p.Get("cursor"),
		Metadata: truthy(p.Get("include_all_metadata"))}
	l.Limit, _ = strconv.Atoi(p.Get("limit"))
	if method == "conversations.replies" && l.TS == "" {
		writeJSON(w, map[string]any{"ok": false, "error": "thread_not_found"})
		return true
	}
	limit := l.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	if s.pageCap > 0 {
		limit = min(limit, s.pageCap) // history.go
	}
	offset := 0
	if c, ok := strings.CutPrefix(l.Cursor, "o:"); ok {
		offset, _ = strconv.Atoi(c)
	}
	s.mu.Lock()
	s.lookups = append(s.lookups, l)
	listed := s.listed(l, truthy(p.Get("inclusive")))
	s.mu.Unlock()
	page, next := listed[min(offset, len(listed)):], ""
	if len(page) > limit {
		page, next = page[:limit], "o:"+strconv.Itoa(offset+limit)
	}
	out := make([]map[string]any, 0, len(page))
	for _, e := range page {
		m := e.Msg
		msg := map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "user": BotUserID, "bot_id": BotID}
		if e.by != nil {
			msg = e.by.wire(m) // history.go
		}
		if m.ThreadTS != "" {
			msg["thread_ts"] = m.ThreadTS
		}
		if files := s.sharedFiles(m.TS); files != nil { // upload.go
			msg["files"] = files
		}
		if l.Metadata && m.Metadata != "" {
			msg["metadata"] = json.RawMessage(m.Metadata)
		}
		out = append(out, msg)
	}
	writeJSON(w, map[string]any{"ok": true, "messages": out, "has_more": next != "",
		"response_metadata": map[string]any{"next_cursor": next}})
	return true
}

// entry is one message a lookup lists: the bot's (by nil) or one a
// person wrote (history.go).
type entry struct {
	Msg
	by *author
}

// listed is the messages a lookup lists, in its order. s.mu is held.
func (s *Server) listed(l Lookup, inclusive bool) []entry {
	var out []entry
	for _, m := range s.messages {
		if s.lists(l, m, inclusive) {
			out = append(out, entry{Msg: *m})
		}
	}
	for _, w := range s.written { // history.go
		if s.lists(l, &w.Msg, inclusive) {
			out = append(out, entry{Msg: w.Msg, by: &w.by})
		}
	}
	if l.Method == "conversations.replies" && !slices.ContainsFunc(out, func(e entry) bool { return e.TS == l.TS }) {
		out = append(s.parent(l), out...)
	}
	slices.SortStableFunc(out, func(a, b entry) int { return cmp.Compare(tsValue(a.TS), tsValue(b.TS)) })
	if l.Method == "conversations.history" {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

// parent is the thread's parent message, which conversations.replies
// lists first whatever oldest and latest say (none when it is unknown or
// deleted). s.mu is held.
func (s *Server) parent(l Lookup) []entry {
	for _, m := range s.messages {
		if m.TS == l.TS && m.Channel == l.Channel && !m.Deleted {
			return []entry{{Msg: *m}}
		}
	}
	for _, w := range s.written {
		if w.TS == l.TS && w.Channel == l.Channel && !w.Deleted {
			return []entry{{Msg: w.Msg, by: &w.by}}
		}
	}
	return nil
}

// lists reports whether lookup l lists m.
func (s *Server) lists(l Lookup, m *Msg, inclusive bool) bool {
	if m.Deleted || m.Channel != l.Channel {
		return false
	}
	ts := tsValue(m.TS)
	if oldest := tsValue(l.Oldest); l.Oldest != "" && (ts < oldest || ts == oldest && !inclusive) {
		return false
	}
	if latest := tsValue(l.Latest); l.Latest != "" && (ts > latest || ts == latest && !inclusive) {
		return false
	}
	inThread := m.TS == l.TS || m.ThreadTS == l.TS
	topLevel := m.ThreadTS == "" || m.ThreadTS == m.TS
	return l.Method == "conversations.replies" && inThread || l.Method == "conversations.history" && topLevel
}

// tsValue is a ts as a number, for ordering ("" is 0).
func tsValue(ts string) float64 {
	v, _ := strconv.ParseFloat(ts, 64)
	return v
}

func truthy(v string) bool { return v == "1" || v == "true" }
