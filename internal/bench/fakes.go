package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
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

// chatRequest is what the fake models read of a chat completion request.
type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// lastUser is the text of the request's last user message ("" if its
// content is not a string).
func (req chatRequest) lastUser() string {
	last := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			json.Unmarshal(req.Messages[i].Content, &last)
			break
		}
	}
	return last
}

func readChat(w http.ResponseWriter, r *http.Request) (chatRequest, bool) {
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return req, false
	}
	return req, true
}

// completion is a whole chat completion of text, in OpenAI's wire format.
func completion(model, text string) map[string]any {
	return map[string]any{
		"id": "chatcmpl-bench", "object": "chat.completion", "created": time.Now().Unix(), "model": model,
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": text}}},
		"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
	}
}

// echoModel answers every chat completion at once with "echo: " and the
// last user message, in OpenAI's wire format: one JSON completion even to
// a request that asks for a stream (which parley reads as the whole
// answer, as it does from a server that does not stream).
func echoModel(w http.ResponseWriter, r *http.Request) {
	req, ok := readChat(w, r)
	if !ok {
		return
	}
	writeJSON(w, completion(req.Model, "echo: "+req.lastUser()))
}

// Defaults of the streamed model: an answer written over a few seconds,
// as a model writes a paragraph.
const (
	streamChunks = 30
	streamOver   = 4500 * time.Millisecond
)

// streamedModel answers every chat completion with "echo: ", the last
// user message and more words, in chunks pieces spread evenly over over:
// piece k is sent k·over/chunks after the request, and the end (finish
// reason, usage, [DONE]) at over. A request with "stream": true is
// answered as OpenAI streams (server-sent chat.completion.chunk events);
// one without gets the whole completion at over.
func streamedModel(chunks int, over time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, ok := readChat(w, r)
		if !ok {
			return
		}
		pieces := streamPieces(req.lastUser(), chunks)
		start := time.Now()
		wait := func(k int) bool {
			select {
			case <-time.After(time.Until(start.Add(time.Duration(k) * over / time.Duration(chunks)))):
				return true
			case <-r.Context().Done():
				return false
			}
		}
		if !req.Stream {
			if wait(chunks) {
				writeJSON(w, completion(req.Model, strings.Join(pieces, "")))
			}
			return
		}
		fl, _ := w.(http.Flusher)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		event := func(v any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
			if fl != nil {
				fl.Flush()
			}
		}
		chunk := func(delta map[string]any, finish any) map[string]any {
			return map[string]any{"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": start.Unix(), "model": req.Model,
				"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}}
		}
		for k, p := range pieces {
			if !wait(k) {
				return
			}
			delta := map[string]any{"content": p}
			if k == 0 {
				delta["role"] = "assistant"
			}
			event(chunk(delta, nil))
		}
		if !wait(chunks) {
			return
		}
		event(chunk(map[string]any{}, "stop"))
		event(map[string]any{"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": start.Unix(), "model": req.Model,
			"choices": []any{}, "usage": map[string]any{"prompt_tokens": 10, "completion_tokens": chunks, "total_tokens": 10 + chunks}})
		fmt.Fprint(w, "data: [DONE]\n\n")
		if fl != nil {
			fl.Flush()
		}
	}
}

// streamPieces is the streamed answer to last in n pieces: the first is
// the echo (so the first text shown names the bench message), the others
// a word each.
func streamPieces(last string, n int) []string {
	pieces := []string{"echo: " + last}
	for k := 1; k < n; k++ {
		pieces = append(pieces, fmt.Sprintf(" word%d", k))
	}
	return pieces
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
	// methods counts the Web API calls by method, refused ones included.
	methods map[string]int64
	// streams are the messages made with chat.startStream, by ts: the
	// answer is recorded when its stream stops, from the text streamed.
	streams map[string]*benchStream
	nextTS  int64
}

// benchStream is one streamed message of the fake Slack.
type benchStream struct {
	channel, thread string
	text            strings.Builder
	open            bool
}

func newFakeSlack() *fakeSlack {
	return &fakeSlack{answers: map[int][]answer{}, waiters: map[int]chan answer{}, methods: map[string]int64{},
		streams: map[string]*benchStream{}}
}

// methodCounts returns a copy of the calls by method so far.
func (s *fakeSlack) methodCounts() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.methods)
}

// newTS is a message ts no other message of the fake has.
func (s *fakeSlack) newTS() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextTS++
	return fmt.Sprintf("1800000000.%06d", s.nextTS)
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
	s.mu.Lock()
	s.methods[method]++
	s.mu.Unlock()
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
		writeJSON(w, map[string]any{"ok": true, "channel": params["channel"], "ts": s.newTS(),
			"message": map[string]any{"type": "message", "text": params["text"], "user": botUserID, "bot_id": "BBENCH"}})
	case "chat.startStream", "chat.appendStream", "chat.stopStream":
		s.stream(w, method, params)
	case "chat.update": // the edited reply, or a stream repaired to its answer
		writeJSON(w, map[string]any{"ok": true, "channel": params["channel"], "ts": params["ts"], "text": params["text"]})
	case "chat.delete":
		writeJSON(w, map[string]any{"ok": true, "channel": params["channel"], "ts": params["ts"]})
	case "assistant.threads.setStatus": // the thread's status line while the answer is written
		writeJSON(w, map[string]any{"ok": true})
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

// stream answers Slack's streaming methods as Slack does: startStream
// makes a message in streaming state (and needs the recipient ids outside
// a DM), appendStream adds to it, stopStream adds the last text and ends
// it; the answer is the stopped message.
func (s *fakeSlack) stream(w http.ResponseWriter, method string, p map[string]string) {
	fail := func(code string) { writeJSON(w, map[string]any{"ok": false, "error": code}) }
	channel, md := p["channel"], p["markdown_text"]
	if method == "chat.startStream" {
		if channel == "" || p["thread_ts"] == "" || p["recipient_user_id"] == "" || p["recipient_team_id"] == "" {
			fail("invalid_arguments")
			return
		}
		ts := s.newTS()
		st := &benchStream{channel: channel, thread: p["thread_ts"], open: true}
		st.text.WriteString(md)
		s.mu.Lock()
		s.streams[ts] = st
		s.mu.Unlock()
		writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": ts})
		return
	}
	ts := p["ts"]
	s.mu.Lock()
	st := s.streams[ts]
	switch {
	case st == nil || st.channel != channel:
		s.mu.Unlock()
		fail("message_not_found")
		return
	case !st.open:
		s.mu.Unlock()
		fail("message_not_in_streaming_state")
		return
	case method == "chat.appendStream" && md == "":
		s.mu.Unlock()
		fail("no_text")
		return
	}
	st.text.WriteString(md)
	done := method == "chat.stopStream"
	if done {
		st.open = false
	}
	text := st.text.String()
	s.mu.Unlock()
	if done {
		s.record(text, answer{at: time.Now(), channel: channel, thread: st.thread})
	}
	writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": ts})
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
