package slacktest

import (
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// What people wrote, as Slack lists it back: Say and SayAsBot add
// messages of others to a channel or thread (conversations.replies and
// conversations.history list them with the bot's own, thread.go), and
// users.info answers for the people AddUser describes (user_not_found for
// anyone else). CapPage makes every page of a history read hold at most n
// messages, as Slack does for a commercially distributed app outside the
// Marketplace (15 since 2025): with Fail, scripting a 429 after the first
// call, that is the whole of the newer limit.

// User is a person users.info describes.
type User struct {
	ID          string
	Name        string // the handle (name)
	RealName    string
	DisplayName string // profile.display_name, "" when unset
}

// File is a file shared with a message, as Slack lists it.
type File struct {
	Name     string
	Mimetype string
	Size     int64
}

// author is who wrote a message of history.written, and what else it
// carries besides the text.
type author struct {
	user     string
	botID    string
	username string // a bot message's username
	subtype  string
	files    []File
	profile  *User // user_profile, when Slack includes it in the message
}

// said is one message someone other than this bot wrote.
type said struct {
	Msg
	by author
}

// history is the part of Server that holds what others wrote.
type history struct {
	written     []said
	pageCap     int
	users       map[string]User
	userLookups []string
}

// Say adds a message user wrote in channel (in thread, "" for the top
// level), with files if any, and returns its ts.
func (s *Server) Say(channel, thread, user, text string, files ...File) string {
	subtype := ""
	if len(files) > 0 {
		subtype = "file_share"
	}
	return s.write(channel, thread, text, author{user: user, subtype: subtype, files: files})
}

// SayAs is Say with the message's subtype set (channel_join, me_message…).
func (s *Server) SayAs(channel, thread, user, subtype, text string) string {
	return s.write(channel, thread, text, author{user: user, subtype: subtype})
}

// SayAsBot adds a message of another app's bot (bot_id, username,
// subtype bot_message) and returns its ts.
func (s *Server) SayAsBot(channel, thread, botID, username, text string) string {
	return s.write(channel, thread, text, author{botID: botID, username: username, subtype: "bot_message"})
}

// SayWithProfile is Say with user_profile included in the message, as
// Slack does for some messages: a name that needs no users.info.
func (s *Server) SayWithProfile(channel, thread string, u User, text string) string {
	return s.write(channel, thread, text, author{user: u.ID, profile: &u})
}

func (s *Server) write(channel, thread, text string, by author) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := fmt.Sprintf("1800000000.%06d", s.nextTS)
	s.nextTS++
	s.written = append(s.written, said{Msg: Msg{Channel: channel, ThreadTS: thread, TS: ts, Text: text, At: time.Now()}, by: by})
	return ts
}

// CapPage bounds every page of conversations.replies and .history to n
// messages (0: no bound beyond limit's).
func (s *Server) CapPage(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageCap = n
}

// AddUser makes users.info describe u.
func (s *Server) AddUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users == nil {
		s.users = map[string]User{}
	}
	s.users[u.ID] = u
}

// UserLookups lists the users.info calls, by the user asked for.
func (s *Server) UserLookups() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.userLookups...)
}

// wire is the message as conversations.replies or .history gives it.
func (a *author) wire(m Msg) map[string]any {
	msg := map[string]any{"type": "message", "ts": m.TS, "text": m.Text}
	if a.user != "" {
		msg["user"] = a.user
	}
	if a.botID != "" {
		msg["bot_id"] = a.botID
		msg["username"] = a.username
		msg["bot_profile"] = map[string]any{"id": a.botID, "name": a.username}
	}
	if a.subtype != "" {
		msg["subtype"] = a.subtype
	}
	if a.profile != nil {
		msg["user_profile"] = map[string]any{"name": a.profile.Name, "real_name": a.profile.RealName,
			"display_name": a.profile.DisplayName}
	}
	if len(a.files) > 0 {
		files := make([]map[string]any, 0, len(a.files))
		for i, f := range a.files {
			id := fmt.Sprintf("F%s%d", m.TS, i)
			files = append(files, map[string]any{"id": id, "name": f.Name, "mimetype": f.Mimetype, "size": f.Size,
				"url_private_download": "https://files.slack.com/files-pri/" + id + "/" + url.PathEscape(f.Name)})
		}
		msg["files"] = files
	}
	return msg
}

// userInfo answers users.info; false for any other method.
func (s *Server) userInfo(w http.ResponseWriter, method string, p url.Values) bool {
	if method != "users.info" {
		return false
	}
	id := p.Get("user")
	s.mu.Lock()
	s.userLookups = append(s.userLookups, id)
	u, ok := s.users[id]
	s.mu.Unlock()
	if !ok {
		writeJSON(w, map[string]any{"ok": false, "error": "user_not_found"})
		return true
	}
	writeJSON(w, map[string]any{"ok": true, "user": map[string]any{"id": u.ID, "team_id": TeamID, "name": u.Name,
		"real_name": u.RealName, "profile": map[string]any{"real_name": u.RealName, "display_name": u.DisplayName}}})
	return true
}

// writtenBy reports whether ts in channel is a message someone other
// than the bot wrote. s.mu is held.
func (s *Server) writtenBy(channel, ts string) bool {
	for _, m := range s.written {
		if m.TS == ts && m.Channel == channel {
			return true
		}
	}
	return false
}
