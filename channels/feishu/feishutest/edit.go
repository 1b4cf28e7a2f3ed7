package feishutest

import (
	"encoding/json"
	"net/http"
)

// Editing a sent message, as the Open API answers it:
//
//   - PATCH /open-apis/im/v1/messages/:message_id (content: a card's
//     JSON) redraws a shared card (config.update_multi) the bot sent
//     (cardkit.go);
//   - PUT /open-apis/im/v1/messages/:message_id (msg_type text or post,
//     content) edits a text or post message the bot sent, at most
//     MaxEdits times; a card is refused with CodeNotEditable (it is
//     PATCHed instead).
//
// Both answer 230011 for a message withdrawn or never sent, and
// CodeNotSender for a message someone else wrote (Say). Fail(OpPatch, …)
// and Fail(OpEdit, …) script failures, a rate limit being {Status: 400,
// Code: 230020}. Edits lists the edits that took effect.

// Codes of a refused edit.
const (
	CodeNotSender   = 230071 // the operator is not the message's sender
	CodeEditLimit   = 230072 // the message was edited MaxEdits times
	CodeNotEditable = 230054 // this type of message cannot be edited
	MaxEdits        = 20
	codeMessageGone = 230011
	msgMessageGone  = "The message was withdrawn or not found"
	msgNotSender    = "The operator is not the sender of the message"
	msgNotEditable  = "This type of message cannot be edited"
	msgEditLimit    = "The message has reached the number of times it can be edited"
)

// Edits lists the PATCH and PUT edits that took effect, in order: Op
// says which, MessageID the message, Content its text since.
func (s *Server) Edits() []Call {
	var out []Call
	for _, c := range s.Calls() {
		if (c.Op == OpPatch || c.Op == OpEdit) && !c.Refused {
			out = append(out, c)
		}
	}
	return out
}

// saidBySomeone reports whether id is a message of the history, which
// someone other than the bot wrote. s.mu is held.
func (s *Server) saidBySomeone(id string) bool {
	for _, m := range s.hist.said {
		if m.ID == id && m.SenderType == "user" {
			return true
		}
	}
	return false
}

func (s *Server) editMessage(w http.ResponseWriter, id string, body []byte) {
	var req struct {
		MsgType string `json:"msg_type"`
		Content string `json:"content"`
	}
	if err := json.Unmarshal(body, &req); err != nil || (req.MsgType != "text" && req.MsgType != "post") || req.Content == "" {
		writeJSON(w, 400, map[string]any{"code": 230001, "msg": "invalid msg_type or content"})
		return
	}
	c := Call{Op: OpEdit, MessageID: id, Content: contentText(req.MsgType, req.Content)}
	if s.refuse(w, c, false) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msgIndex[id]
	code, msg := 0, ""
	switch {
	case m == nil && s.saidBySomeone(id):
		code, msg = CodeNotSender, msgNotSender
	case m == nil || m.deleted:
		code, msg = codeMessageGone, msgMessageGone
	case m.msgType != "text" && m.msgType != "post":
		code, msg = CodeNotEditable, msgNotEditable
	case m.patches >= MaxEdits:
		code, msg = CodeEditLimit, msgEditLimit
	}
	if code != 0 {
		c.Refused = true
		s.record(c)
		writeJSON(w, 400, map[string]any{"code": code, "msg": msg})
		return
	}
	m.text, m.msgType, m.patches = c.Content, req.MsgType, m.patches+1
	s.record(c)
	writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"message_id": id, "msg_type": req.MsgType}})
}
