package slacktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Messages with buttons, and clicks on them:
//
//   - chat.postMessage with blocks posts a message with them (Post.Blocks);
//   - chat.update with blocks (channel, ts, text, blocks) replaces a
//     message the fake posted with blocks, recorded in Updates
//     (message_not_found for any other ts);
//   - a response_url post records its blocks and replace_original;
//   - chat.postEphemeral (channel, user, text, thread_ts) is recorded as
//     a post with ResponseType ephemeral and EphemeralTo;
//   - Click builds the block_actions payload Slack sends when a user
//     clicks a button of a posted message, for InteractionForm (HTTP) or
//     SendInteractive (Socket Mode).

// Update is one chat.update that changed a message with blocks.
type Update struct {
	Channel, TS, Text string
	Blocks            string // JSON
}

// Updates lists the chat.update calls with blocks answered ok, in order.
func (s *Server) Updates() []Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Update(nil), s.updates...)
}

// blocksOf is a blocks parameter as recorded ("" for none).
func blocksOf(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

// blocks answers chat.postMessage and chat.update when they carry blocks;
// false for any other call, answered as before.
func (s *Server) blocks(w http.ResponseWriter, method string, p url.Values) bool {
	if method == "chat.postEphemeral" {
		s.ephemeral(w, p)
		return true
	}
	blocks := p.Get("blocks")
	if blocks == "" || (method != "chat.postMessage" && method != "chat.update") {
		return false
	}
	if !json.Valid([]byte(blocks)) {
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_blocks"})
		return true
	}
	channel, text := p.Get("channel"), p.Get("text")
	s.mu.Lock()
	defer s.mu.Unlock()
	if method == "chat.postMessage" {
		ts := fmt.Sprintf("1800000000.%06d", s.nextTS)
		s.nextTS++
		s.posts = append(s.posts, Post{Channel: channel, Text: text, ThreadTS: p.Get("thread_ts"), TS: ts, At: time.Now(), Blocks: blocksOf(json.RawMessage(blocks))})
		s.made(ts, p)
		writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": ts})
		return true
	}
	ts := p.Get("ts")
	for _, post := range s.posts {
		if post.TS == ts && post.Channel == channel && post.Blocks != "" {
			s.updates = append(s.updates, Update{Channel: channel, TS: ts, Text: text, Blocks: blocksOf(json.RawMessage(blocks))})
			writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": ts, "text": text})
			return true
		}
	}
	writeJSON(w, map[string]any{"ok": false, "error": "message_not_found"})
	return true
}

// ephemeral answers chat.postEphemeral (channel, user, text, thread_ts).
func (s *Server) ephemeral(w http.ResponseWriter, p url.Values) {
	if p.Get("channel") == "" || p.Get("user") == "" || p.Get("text") == "" {
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_arguments"})
		return
	}
	s.mu.Lock()
	s.posts = append(s.posts, Post{Channel: p.Get("channel"), Text: p.Get("text"), ThreadTS: p.Get("thread_ts"), At: time.Now(),
		ResponseType: "ephemeral", EphemeralTo: p.Get("user")})
	s.mu.Unlock()
	writeJSON(w, map[string]any{"ok": true, "message_ts": fmt.Sprintf("1800000000.%06d", time.Now().Nanosecond()/1000)})
}

// Click is the block_actions payload of user (userName) clicking the
// button actionID (value) of the message post, as Slack sends it.
// responseURL is the click's response_url ("" for none).
func Click(post Post, user, userName, actionID, value, responseURL string) map[string]any {
	msg := map[string]any{"type": "message", "ts": post.TS, "text": post.Text, "user": BotUserID, "bot_id": BotID}
	if post.ThreadTS != "" {
		msg["thread_ts"] = post.ThreadTS
	}
	if post.Blocks != "" {
		msg["blocks"] = json.RawMessage(post.Blocks)
	}
	p := map[string]any{
		"type": "block_actions", "api_app_id": "A0PARLEY", "token": "legacy-verification-token",
		"trigger_id": "trig-" + value + "-" + user, "is_enterprise_install": false,
		"team":      map[string]any{"id": TeamID, "domain": "parley"},
		"user":      map[string]any{"id": user, "username": userName, "name": userName, "team_id": TeamID},
		"container": map[string]any{"type": "message", "message_ts": post.TS, "channel_id": post.Channel, "is_ephemeral": false},
		"channel":   map[string]any{"id": post.Channel, "name": "general"},
		"message":   msg,
		"actions": []map[string]any{{"type": "button", "action_id": actionID, "block_id": "parley_approval", "value": value,
			"text": map[string]any{"type": "plain_text", "text": actionID}, "action_ts": fmt.Sprintf("%d.000100", time.Now().Unix())}},
	}
	if responseURL != "" {
		p["response_url"] = responseURL
	}
	if strings.HasPrefix(post.Channel, "D") {
		p["channel"] = map[string]any{"id": post.Channel, "name": "directmessage"}
	}
	return p
}

// InteractionForm is the body of an interactivity request carrying
// payload: the form field payload, JSON.
func InteractionForm(payload any) []byte {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	return []byte(url.Values{"payload": {string(b)}}.Encode())
}

// SendInteractive sends an interactive envelope on the newest Socket Mode
// connection.
func (s *Server) SendInteractive(envelopeID string, payload any) error {
	return s.Send(map[string]any{"envelope_id": envelopeID, "type": "interactive", "payload": payload,
		"accepts_response_payload": false})
}
