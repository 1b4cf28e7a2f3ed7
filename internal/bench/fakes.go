package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Tokens the fake Slack accepts and the bench signs with. They are made up:
// nothing leaves the loopback interface.
const (
	botToken      = "xoxb-parley-bench"
	signingSecret = "parley-bench-signing-secret"
	teamID        = "TBENCH"
	botUserID     = "UBENCHBOT"
)

// upstream is a loopback HTTP server that counts the connections it
// accepts: the "new connections" figures.
type upstream struct {
	srv   *http.Server
	ln    net.Listener
	conns atomic.Int64
	done  chan struct{}
}

func startUpstream(h http.Handler) (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &upstream{ln: ln, done: make(chan struct{})}
	u.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}}
	go func() { defer close(u.done); u.srv.Serve(ln) }()
	return u, nil
}

func (u *upstream) URL() string { return "http://" + u.ln.Addr().String() }

func (u *upstream) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	u.srv.Shutdown(ctx)
	u.srv.Close()
	<-u.done
}

// echoModel answers every chat completion at once with "echo: " and the
// last user message, in OpenAI's wire format.
func echoModel(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	last := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			json.Unmarshal(req.Messages[i].Content, &last) // a non-string content echoes as ""
			break
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-bench", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": "echo: " + last}}},
		"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
	})
}

// answer is one chat.postMessage the fake Slack received for a bench
// message.
type answer struct {
	at      time.Time
	channel string
	thread  string
}

// fakeSlack is the Slack Web API methods `parley serve` calls for an app
// mention. Every answer is matched to the bench message whose marker it
// carries.
type fakeSlack struct {
	// calls counts every Web API call, for the calls per answered
	// message; reads those that read the room (the thread, names).
	calls   atomic.Int64
	reads   atomic.Int64
	mu      sync.Mutex
	answers map[int][]answer
	waiters map[int]chan answer
	stray   int // answers that name no bench message
}

func newFakeSlack() *fakeSlack {
	return &fakeSlack{answers: map[int][]answer{}, waiters: map[int]chan answer{}}
}

// expect registers a message before it is sent; the channel receives its
// first answer.
func (s *fakeSlack) expect(id int) <-chan answer {
	ch := make(chan answer, 1)
	s.mu.Lock()
	s.waiters[id] = ch
	s.mu.Unlock()
	return ch
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *fakeSlack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	s.calls.Add(1)
	if method == "conversations.replies" || method == "conversations.history" || method == "users.info" {
		s.reads.Add(1)
	}
	params := map[string]string{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var m map[string]any
		json.NewDecoder(r.Body).Decode(&m)
		for k, v := range m {
			params[k] = fmt.Sprint(v)
		}
	} else {
		r.ParseForm()
		for k := range r.Form {
			params[k] = r.Form.Get(k)
		}
	}
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token == "" {
		token = params["token"]
	}
	if token != botToken {
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	switch method {
	case "auth.test":
		writeJSON(w, map[string]any{"ok": true, "url": "https://bench.slack.com/", "team": "Bench", "user": "parley",
			"team_id": teamID, "user_id": botUserID, "bot_id": "BBENCH"})
	case "chat.postMessage":
		s.record(params["text"], answer{at: time.Now(), channel: params["channel"], thread: params["thread_ts"]})
		writeJSON(w, map[string]any{"ok": true, "channel": params["channel"], "ts": strconv.FormatInt(time.Now().UnixNano(), 10)})
	case "reactions.add", "reactions.remove":
		writeJSON(w, map[string]any{"ok": true})
	case "conversations.info": // asked once per channel, whether a mention came from a group DM
		writeJSON(w, map[string]any{"ok": true, "channel": map[string]any{"id": params["channel"], "is_channel": true}})
	case "conversations.replies": // the thread read back before answering (LEVEL.context.thread)
		writeJSON(w, map[string]any{"ok": true, "messages": benchThread(params["ts"]), "has_more": false})
	case "users.info": // the names of the thread's writers, cached by parley
		writeJSON(w, map[string]any{"ok": true, "user": map[string]any{"id": params["user"], "name": "bench",
			"real_name": "Bench Writer", "profile": map[string]any{"real_name": "Bench Writer", "display_name": "bench"}}})
	default:
		writeJSON(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// benchThread is what others wrote in the thread ts before the bench's
// mention (whose ts is later than all of these): its parent and two
// replies, by two people.
func benchThread(ts string) []map[string]any {
	reply := func(prefix string) string { return strings.Replace(ts, "1700000000.", prefix, 1) }
	return []map[string]any{
		{"type": "message", "ts": ts, "thread_ts": ts, "user": "UBENCHW1", "text": "the deploy of build 42 failed"},
		{"type": "message", "ts": reply("1700000500."), "thread_ts": ts, "user": "UBENCHW2", "text": "it is the migration again"},
		{"type": "message", "ts": reply("1700000600."), "thread_ts": ts, "user": "UBENCHW1", "text": "who can look?"},
	}
}

// marker is the text every bench message carries, and the echo with it.
func marker(id int) string { return fmt.Sprintf("bench-%d.", id) }

func parseMarker(text string) (int, bool) {
	i := strings.Index(text, "bench-")
	if i < 0 {
		return 0, false
	}
	rest := text[i+len("bench-"):]
	j := strings.IndexByte(rest, '.')
	if j <= 0 {
		return 0, false
	}
	id, err := strconv.Atoi(rest[:j])
	return id, err == nil
}

func (s *fakeSlack) record(text string, a answer) {
	id, ok := parseMarker(text)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok {
		s.stray++
		return
	}
	s.answers[id] = append(s.answers[id], a)
	if ch, ok := s.waiters[id]; ok {
		delete(s.waiters, id)
		ch <- a
	}
}
