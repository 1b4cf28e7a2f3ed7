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
//   - chat.update (channel, ts, text) replaces a message's text;
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
	fail := func(code string) { writeJSON(w, map[string]any{"ok": false, "error": code}) }
	channel, ts, md := p.Get("channel"), p.Get("ts"), p.Get("markdown_text")
	if method == "assistant.threads.setStatus" {
		channel, ts = p.Get("channel_id"), p.Get("thread_ts")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	logCall := func(ts, text string) {
		s.log = append(s.log, Call{Method: method, Channel: channel, TS: ts, Text: text, At: now})
	}
	switch method {
	case "chat.startStream":
		switch {
		case channel == "":
			fail("channel_not_found")
		case channel[0] != 'D' && (p.Get("recipient_user_id") == "" || p.Get("recipient_team_id") == ""):
			fail("invalid_arguments")
		case utf8.RuneCountInString(md) > MaxMarkdown:
			fail("msg_too_long")
		default:
			ts := fmt.Sprintf("1800000000.%06d", s.nextTS)
			s.nextTS++
			s.messages = append(s.messages, &Msg{Channel: channel, ThreadTS: p.Get("thread_ts"), TS: ts, Text: md,
				Streamed: true, Streaming: true, RecipientUser: p.Get("recipient_user_id"), RecipientTeam: p.Get("recipient_team_id"), At: now})
			logCall(ts, md)
			writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": ts})
		}
	case "chat.appendStream", "chat.stopStream":
		m := s.message(channel, ts)
		switch {
		case m == nil:
			fail("message_not_found")
		case !m.Streaming:
			fail("message_not_in_streaming_state")
		case method == "chat.appendStream" && md == "":
			fail("no_text")
		case utf8.RuneCountInString(m.Text+md) > MaxMarkdown:
			fail("msg_too_long")
		default:
			m.Text += md
			logCall(ts, md)
			if method == "chat.stopStream" {
				m.Streaming = false
				s.posts = append(s.posts, Post{Channel: channel, Text: m.Text, ThreadTS: m.ThreadTS, TS: ts, At: now})
			}
			writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": ts})
		}
	case "chat.update":
		m := s.message(channel, ts)
		switch {
		case m == nil:
			fail("message_not_found")
		case p.Get("text") == "":
			fail("no_text")
		case m.Streaming:
			fail("message_is_streaming") // stop the stream first
		default:
			m.Text = p.Get("text")
			m.Updates++
			logCall(ts, m.Text)
			writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": ts, "text": m.Text})
		}
	case "chat.delete":
		m := s.message(channel, ts)
		if m == nil {
			fail("message_not_found")
			break
		}
		m.Deleted, m.Streaming = true, false
		logCall(ts, "")
		writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": ts})
	case "assistant.threads.setStatus":
		if channel == "" || ts == "" {
			fail("invalid_arguments")
			break
		}
		logCall(ts, p.Get("status"))
		writeJSON(w, map[string]any{"ok": true})
	default:
		return false
	}
	return true
}
