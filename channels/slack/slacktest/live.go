package slacktest

import (
	"fmt"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"
)

// The methods of a live reply, as Slack's Web API answers them:
//
//   - chat.startStream (channel, thread_ts, recipient_user_id,
//     recipient_team_id, markdown_text) makes a message in streaming state
//     and answers its ts;
//   - chat.appendStream (channel, ts, markdown_text) adds to it;
//   - chat.stopStream (channel, ts, markdown_text) adds the last text and
//     ends the stream;
//   - chat.update (channel, ts, text) replaces the text of a message the
//     bot made (cant_update_message for one someone else wrote, Say);
//   - chat.delete (channel, ts) removes a message;
//   - assistant.threads.setStatus (channel_id, thread_ts, status) sets the
//     status line of a thread ("" clears it).
//
// A streamed message takes at most MaxMarkdown characters in all
// (msg_too_long past it), as does each markdown_text; a stream not (or no
// longer) streaming answers message_not_in_streaming_state, an unknown ts
// message_not_found. Outside a DM, chat.startStream requires both
// recipient ids (invalid_arguments without them), as Slack does when
// streaming to a channel. Every call of these methods is logged with its
// time (Log); Refuse or Fail make any of them fail.

// MaxMarkdown is the most characters one streamed message holds.
const MaxMarkdown = 12000

// Msg is one message the fake holds, as it stands now.
type Msg struct {
	Channel  string
	ThreadTS string
	TS       string
	// Text is the message's text: the posted (or last updated) text, or
	// the markdown streamed into it so far.
	Text string
	// Streamed: made with chat.startStream. Streaming: not stopped yet.
	Streamed, Streaming bool
	// RecipientUser and RecipientTeam are chat.startStream's recipient ids.
	RecipientUser, RecipientTeam string
	Updates                      int  // chat.update calls that changed it
	Deleted                      bool // removed with chat.delete
	At                           time.Time
	// Metadata is the message's metadata as posted (JSON: event_type
	// and event_payload), or "".
	Metadata string
}

// Call is one call of a live reply's methods (or chat.postMessage) that
// the fake answered ok, with the time it arrived.
type Call struct {
	Method  string
	Channel string
	TS      string // the message's ts (thread_ts for setStatus)
	Text    string // text, markdown_text or status
	At      time.Time
}

// Messages lists every message made (posted or streamed), in the order
// they were made, as each stands now (deleted ones included, marked).
func (s *Server) Messages() []Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Msg, len(s.messages))
	for i, m := range s.messages {
		out[i] = *m
	}
	return out
}

// Visible lists the messages not deleted, in order, as they stand now.
func (s *Server) Visible() []Msg {
	var out []Msg
	for _, m := range s.Messages() {
		if !m.Deleted {
			out = append(out, m)
		}
	}
	return out
}

// Log lists the calls of chat.postMessage and of the live reply's methods
// answered ok, in the order they arrived.
func (s *Server) Log() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.log...)
}

// message finds the message ts in channel. s.mu is held.
func (s *Server) message(channel, ts string) *Msg {
	for _, m := range s.messages {
		if m.TS == ts && m.Channel == channel && !m.Deleted {
			return m
		}
	}
	return nil
}

// live answers the methods of a live reply; false for any other method.
func (s *Server) live(w http.ResponseWriter, method string, p url.Values) bool {
	c := &liveCall{s: s, w: w, method: method, p: p, channel: p.Get("channel"), ts: p.Get("ts"), md: p.Get("markdown_text"), now: time.Now()}
	if method == "assistant.threads.setStatus" {
		c.channel, c.ts = p.Get("channel_id"), p.Get("thread_ts")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch method {
	case "chat.startStream":
		c.startStream()
	case "chat.appendStream", "chat.stopStream":
		c.appendStream()
	case "chat.update":
		c.update()
	case "chat.delete":
		m := s.message(c.channel, c.ts)
		if m == nil {
			c.fail("message_not_found")
			break
		}
		m.Deleted, m.Streaming = true, false
		c.logCall(c.ts, "")
		c.ok()
	case "assistant.threads.setStatus":
		if c.channel == "" || c.ts == "" {
			c.fail("invalid_arguments")
			break
		}
		c.logCall(c.ts, p.Get("status"))
		writeJSON(w, map[string]any{"ok": true})
	default:
		return false
	}
	return true
}

// liveCall is one call of a live-reply method, answered under s.mu.
type liveCall struct {
	s           *Server
	w           http.ResponseWriter
	method      string
	p           url.Values
	channel, ts string
	md          string // markdown_text
	now         time.Time
}

func (c *liveCall) fail(code string) { writeJSON(c.w, map[string]any{"ok": false, "error": code}) }

func (c *liveCall) ok() { writeJSON(c.w, map[string]any{"ok": true, "channel": c.channel, "ts": c.ts}) }

func (c *liveCall) logCall(ts, text string) {
	c.s.log = append(c.s.log, Call{Method: c.method, Channel: c.channel, TS: ts, Text: text, At: c.now})
}

// startStream is chat.startStream: a new streaming message.
func (c *liveCall) startStream() {
	s, p := c.s, c.p
	switch {
	case c.channel == "":
		c.fail("channel_not_found")
	case c.channel[0] != 'D' && (p.Get("recipient_user_id") == "" || p.Get("recipient_team_id") == ""):
		c.fail("invalid_arguments")
	case utf8.RuneCountInString(c.md) > MaxMarkdown:
		c.fail("msg_too_long")
	default:
		ts := fmt.Sprintf("1800000000.%06d", s.nextTS)
		s.nextTS++
		s.messages = append(s.messages, &Msg{Channel: c.channel, ThreadTS: p.Get("thread_ts"), TS: ts, Text: c.md,
			Streamed: true, Streaming: true, RecipientUser: p.Get("recipient_user_id"), RecipientTeam: p.Get("recipient_team_id"), At: c.now,
			Metadata: p.Get("metadata")})
		s.made(ts, p)
		c.logCall(ts, c.md)
		writeJSON(c.w, map[string]any{"ok": true, "channel": c.channel, "ts": ts})
	}
}

// appendStream is chat.appendStream and chat.stopStream: text added to a
// streaming message, which stopStream then posts.
func (c *liveCall) appendStream() {
	m := c.s.message(c.channel, c.ts)
	switch {
	case m == nil:
		c.fail("message_not_found")
	case !m.Streaming:
		c.fail("message_not_in_streaming_state")
	case c.method == "chat.appendStream" && c.md == "":
		c.fail("no_text")
	case utf8.RuneCountInString(m.Text+c.md) > MaxMarkdown:
		c.fail("msg_too_long")
	default:
		m.Text += c.md
		c.logCall(c.ts, c.md)
		if c.method == "chat.stopStream" {
			m.Streaming = false
			c.s.posts = append(c.s.posts, Post{Channel: c.channel, Text: m.Text, ThreadTS: m.ThreadTS, TS: c.ts, At: c.now})
		}
		c.ok()
	}
}

// update is chat.update of a message that is not streaming.
func (c *liveCall) update() {
	m := c.s.message(c.channel, c.ts)
	switch {
	case m == nil && c.s.writtenBy(c.channel, c.ts):
		c.fail("cant_update_message") // someone else's message
	case m == nil:
		c.fail("message_not_found")
	case c.p.Get("text") == "":
		c.fail("no_text")
	case m.Streaming:
		c.fail("message_is_streaming") // stop the stream first
	default:
		m.Text = c.p.Get("text")
		m.Updates++
		c.logCall(c.ts, m.Text)
		writeJSON(c.w, map[string]any{"ok": true, "channel": c.channel, "ts": c.ts, "text": m.Text})
	}
}

// Edits lists the chat.update calls answered ok that changed a message's
// text (not its blocks), in order: TS the message, Text its new text.
func (s *Server) Edits() []Call {
	var out []Call
	for _, c := range s.Log() {
		if c.Method == "chat.update" {
			out = append(out, c)
		}
	}
	return out
}
