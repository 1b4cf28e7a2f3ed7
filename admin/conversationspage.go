package admin

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/skills"
)

type conversationsData struct {
	Inventory sessions.Inventory
	ByChannel []channelGroup
	Detail    *conversationDetail
}

type channelGroup struct {
	Channel       string
	Conversations []sessions.ConversationInfo
}

type conversationDetail struct {
	Key      string
	Info     sessions.ConversationInfo
	Messages []messageView
}

// messageView is one history entry as the console shows it: Class says
// what it is (user, assistant, tool-result, injection, summary, system).
type messageView struct {
	Class, Label, Text string
	Calls              []string
}

// maxConversations is how many of the most recent conversations are listed.
const maxConversations = 200

func (s *Server) conversationsPage(r *http.Request, id identity, v *view) (string, error) {
	ctx := r.Context()
	v.Title, v.Nav = "Conversations", "conversations"
	inv, err := s.cfg.Store.Inventory(ctx, maxConversations)
	if err != nil {
		return "", err
	}
	d := &conversationsData{Inventory: inv}
	groups := map[string]int{}
	for _, c := range inv.Conversations {
		ch := scopeOf(c.Key).Channel
		i, ok := groups[ch]
		if !ok {
			i = len(d.ByChannel)
			groups[ch] = i
			d.ByChannel = append(d.ByChannel, channelGroup{Channel: ch})
		}
		d.ByChannel[i].Conversations = append(d.ByChannel[i].Conversations, c)
	}
	slices.SortFunc(d.ByChannel, func(a, b channelGroup) int { return strings.Compare(a.Channel, b.Channel) })
	// A conversation is named as it is shown (sessions.ShownKey) or by
	// its key.
	if key := sessions.KeyOf(r.URL.Query().Get("c")); key != "" {
		det, err := s.conversationDetail(ctx, key, inv)
		if err != nil {
			return "", err
		}
		d.Detail = det
		v.Title = "Conversation " + sessions.ShownKey(key)
	}
	v.Data = d
	return "conversations", nil
}

func (s *Server) conversationDetail(ctx context.Context, key string, inv sessions.Inventory) (*conversationDetail, error) {
	msgs, err := s.cfg.Store.History(ctx, key)
	if err != nil {
		return nil, err
	}
	det := &conversationDetail{Key: key, Info: sessions.ConversationInfo{Key: key, Messages: int64(len(msgs))}}
	for _, c := range inv.Conversations {
		if c.Key == key {
			det.Info = c
		}
	}
	for _, m := range msgs {
		det.Messages = append(det.Messages, viewMessage(m))
	}
	return det, nil
}

// viewMessage tells the kinds of history entries apart the way the agent
// does: injections by their kind or marker, tool results by their
// untrusted envelope.
func viewMessage(m sessions.Message) messageView {
	switch m.Role {
	case "user":
		if name, ok := skills.ParseInjection(m.Content); ok || m.Kind == sessions.KindInjection {
			if name == "" {
				name = "?"
			}
			return messageView{Class: "injection", Label: "Skill injection: " + name, Text: m.Content}
		}
		if m.Kind == sessions.KindSummary {
			return messageView{Class: "summary", Label: "Summary of earlier rounds", Text: m.Content}
		}
		return messageView{Class: "user", Label: "User", Text: m.Content}
	case "assistant":
		v := messageView{Class: "assistant", Label: "Assistant", Text: m.Content}
		if m.Kind == sessions.KindSummary {
			v.Class, v.Label = "summary", "Summary of earlier rounds"
		}
		for _, c := range m.ToolCalls {
			v.Calls = append(v.Calls, c.Name+"("+c.Arguments+")")
		}
		return v
	case "tool":
		if name, content, ok := agent.UnwrapToolResult(m.Content); ok {
			return messageView{Class: "tool-result", Label: "Tool result: " + name + " (untrusted data)", Text: content}
		}
		return messageView{Class: "tool-result", Label: "Tool result (untrusted data)", Text: m.Content}
	}
	return messageView{Class: "system", Label: m.Role, Text: m.Content}
}

// maxKeyLen bounds a conversation key a form may name.
const maxKeyLen = 1024

func (s *Server) conversationAction(w http.ResponseWriter, r *http.Request, id identity) (string, int, error) {
	ctx := r.Context()
	key, action := sessions.KeyOf(r.PostFormValue("c")), r.PostFormValue("action")
	if key == "" || len(key) > maxKeyLen {
		return "", http.StatusBadRequest, nil
	}
	shown := sessions.ShownKey(key)
	back := func(code string) string { return doneURL("/admin/conversations", code, shown, "c", shown) }
	switch action {
	case "reset":
		err := s.cfg.Conversations.ResetConversation(ctx, key)
		if code, ok := busyOrFailed(err); ok {
			s.audit(r, id, "conversation reset", shown, code)
			return back(code), 0, nil
		}
		s.audit(r, id, "conversation reset", shown, "ok")
		return back("reset"), 0, nil
	case "compact":
		outcome, err := s.cfg.Conversations.CompactConversation(ctx, key)
		if code, ok := busyOrFailed(err); ok {
			if code == "failed" {
				s.log.Warn("admin: compact", "conversation", shown, "err", err)
			}
			s.audit(r, id, "conversation compact", shown, code)
			return back(code), 0, nil
		}
		s.audit(r, id, "conversation compact", shown, outcome)
		if outcome == "ok" {
			return back("compacted"), 0, nil
		}
		return back("nothing"), 0, nil
	}
	return "", http.StatusBadRequest, nil
}

// busyOrFailed names the outcome of a failed reset or compaction: a
// conversation whose lock another holder has (a turn is running) is busy.
func busyOrFailed(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	if errors.Is(err, sessions.ErrLocked) {
		return "busy", true
	}
	return "failed", true
}
