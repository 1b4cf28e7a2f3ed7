package feishutest

// CardKit (card entities streamed to), message edits and recalls: the
// calls a live reply makes, each recorded with the time it arrived and
// each able to be refused (Fail with its op name).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Ops of the calls recorded by Calls, also the names Fail takes.
const (
	OpCardCreate   = "card_create"   // POST /open-apis/cardkit/v1/cards
	OpCardContent  = "card_content"  // PUT …/cards/:card_id/elements/:element_id/content
	OpCardSettings = "card_settings" // PATCH …/cards/:card_id/settings
	OpPatch        = "patch"         // PATCH /open-apis/im/v1/messages/:message_id
	OpEdit         = "edit"          // PUT /open-apis/im/v1/messages/:message_id (edit.go)
	OpDelete       = "delete"        // DELETE /open-apis/im/v1/messages/:message_id
)

// Card is a card entity made through CardKit.
type Card struct {
	ID        string
	Streaming bool              // streaming_mode as last set
	Summary   string            // config.summary.content as last set
	Elements  map[string]string // element_id → content
	Order     []string          // element ids in the card's order
	Sequence  int               // the highest sequence accepted
	MessageID string            // the message it was sent in ("" until sent)
}

// Text is the card's text elements joined, as the user sees them.
func (c Card) Text() string {
	var parts []string
	for _, id := range c.Order {
		parts = append(parts, c.Elements[id])
	}
	return strings.Join(parts, "\n")
}

// Call is one CardKit, edit or recall call the fake received, refused ones
// included.
type Call struct {
	Op        string
	CardID    string
	MessageID string
	Element   string
	Sequence  int
	Content   string // the element content, the settings or the patched card's text
	At        time.Time
	Refused   bool
}

// Visible is a message as the user sees it now.
type Visible struct {
	MessageID string
	MsgType   string
	CardID    string // set for a message carrying a card entity
	Streaming bool   // its card is still in streaming mode
	Text      string
}

// msgState is what the fake keeps of each message it accepted.
type msgState struct {
	id       string
	msgType  string
	text     string // for a message without a card entity
	cardID   string
	multi    bool // an interactive card with config.update_multi
	deleted  bool
	patches  int
	replyTo  string
	chatID   string
	inThread bool
}

// Calls lists the CardKit, edit and recall calls received, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Cards lists the card entities made, in order.
func (s *Server) Cards() []Card {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Card
	for _, id := range s.cardOrder {
		c := *s.cards[id]
		c.Elements = map[string]string{}
		for k, v := range s.cards[id].Elements {
			c.Elements[k] = v
		}
		c.Order = append([]string(nil), s.cards[id].Order...)
		out = append(out, c)
	}
	return out
}

// Visible lists the messages not recalled, in the order they were sent,
// with the text each shows now.
func (s *Server) Visible() []Visible {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Visible
	for _, m := range s.msgs {
		if m.deleted {
			continue
		}
		v := Visible{MessageID: m.id, MsgType: m.msgType, CardID: m.cardID, Text: m.text}
		if c := s.cards[m.cardID]; c != nil {
			v.Text, v.Streaming = c.Text(), c.Streaming
		}
		out = append(out, v)
	}
	return out
}

// RefuseCardKit makes every CardKit call fail as it does for an app
// without the cardkit:card:write scope.
func (s *Server) RefuseCardKit(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuseCardKit = on
}

// record appends a call; s.mu is held.
func (s *Server) record(c Call) {
	c.At = time.Now()
	s.calls = append(s.calls, c)
}

// refuse answers a call with its scripted failure or the missing scope,
// recording it; false when the call goes on.
func (s *Server) refuse(w http.ResponseWriter, c Call, cardKit bool) bool {
	if f, ok := s.takeFailure(c.Op); ok {
		c.Refused = true
		s.mu.Lock()
		s.record(c)
		s.mu.Unlock()
		writeFailure(w, f)
		return true
	}
	s.mu.Lock()
	refused := cardKit && s.refuseCardKit
	if refused {
		c.Refused = true
		s.record(c)
	}
	s.mu.Unlock()
	if refused {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": 99991672,
			"msg":   "Access denied. One of the following scopes is required: [cardkit:card:write]",
			"error": map[string]string{"log_id": "fake-scope-log"}})
	}
	return refused
}

// serveCardKit handles the CardKit, edit and recall routes; false for any
// other request.
func (s *Server) serveCardKit(w http.ResponseWriter, r *http.Request, body []byte) bool {
	path := r.URL.Path
	const cards = "/open-apis/cardkit/v1/cards"
	const messages = "/open-apis/im/v1/messages/"
	switch {
	case r.Method == http.MethodPost && path == cards:
		if s.authorized(w, r) {
			s.cardCreate(w, body)
		}
	case r.Method == http.MethodPut && strings.HasPrefix(path, cards+"/") && strings.HasSuffix(path, "/content"):
		// /open-apis/cardkit/v1/cards/:card_id/elements/:element_id/content
		p := strings.Split(strings.TrimPrefix(path, cards+"/"), "/")
		if len(p) != 4 || p[1] != "elements" {
			return false
		}
		if s.authorized(w, r) {
			s.cardContent(w, p[0], p[2], body)
		}
	case r.Method == http.MethodPatch && strings.HasPrefix(path, cards+"/") && strings.HasSuffix(path, "/settings"):
		if s.authorized(w, r) {
			s.cardSettings(w, strings.TrimSuffix(strings.TrimPrefix(path, cards+"/"), "/settings"), body)
		}
	case r.Method == http.MethodPatch && strings.HasPrefix(path, messages) && !strings.Contains(strings.TrimPrefix(path, messages), "/"):
		if s.authorized(w, r) {
			s.patchMessage(w, strings.TrimPrefix(path, messages), body)
		}
	case r.Method == http.MethodPut && strings.HasPrefix(path, messages) && !strings.Contains(strings.TrimPrefix(path, messages), "/"):
		if s.authorized(w, r) {
			s.editMessage(w, strings.TrimPrefix(path, messages), body) // edit.go
		}
	case r.Method == http.MethodDelete && strings.HasPrefix(path, messages) && !strings.Contains(strings.TrimPrefix(path, messages), "/"):
		if s.authorized(w, r) {
			s.deleteMessage(w, strings.TrimPrefix(path, messages))
		}
	default:
		return false
	}
	return true
}

// cardJSON is the part of a card's JSON the fake reads.
type cardJSON struct {
	Schema string `json:"schema"`
	Config struct {
		StreamingMode bool `json:"streaming_mode"`
		UpdateMulti   bool `json:"update_multi"`
		Summary       struct {
			Content string `json:"content"`
		} `json:"summary"`
	} `json:"config"`
	Body struct {
		Elements []struct {
			Tag       string `json:"tag"`
			ElementID string `json:"element_id"`
			Content   string `json:"content"`
		} `json:"elements"`
	} `json:"body"`
}

func (s *Server) cardCreate(w http.ResponseWriter, body []byte) {
	c := Call{Op: OpCardCreate}
	if s.refuse(w, c, true) {
		return
	}
	var req struct {
		Type string `json:"type"`
		Data string `json:"data"`
	}
	var card cardJSON
	if json.Unmarshal(body, &req) != nil || req.Type != "card_json" || json.Unmarshal([]byte(req.Data), &card) != nil || card.Schema != "2.0" {
		writeJSON(w, 400, map[string]any{"code": 200621, "msg": "parse card json err, please check whether the card json is correct"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := fmt.Sprintf("card_%d", len(s.cardOrder)+1)
	entity := &Card{ID: id, Streaming: card.Config.StreamingMode, Summary: card.Config.Summary.Content, Elements: map[string]string{}}
	for _, e := range card.Body.Elements {
		if e.ElementID == "" {
			continue
		}
		entity.Elements[e.ElementID] = e.Content
		entity.Order = append(entity.Order, e.ElementID)
	}
	s.cards[id] = entity
	s.cardOrder = append(s.cardOrder, id)
	c.CardID, c.Content = id, entity.Text()
	s.record(c)
	writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"card_id": id}})
}

// sequenced checks a card call's card and sequence; s.mu is held. It
// answers the refusal itself and returns nil then.
func (s *Server) sequenced(w http.ResponseWriter, c *Call, seq int) *Card {
	card := s.cards[c.CardID]
	if card == nil {
		c.Refused = true
		s.record(*c)
		writeJSON(w, 400, map[string]any{"code": 300305, "msg": "card not found"})
		return nil
	}
	if seq <= card.Sequence {
		c.Refused = true
		s.record(*c)
		writeJSON(w, 400, map[string]any{"code": 300317, "msg": "sequence number compare failed"})
		return nil
	}
	return card
}

func (s *Server) cardContent(w http.ResponseWriter, cardID, element string, body []byte) {
	var req struct {
		UUID     string `json:"uuid"`
		Content  string `json:"content"`
		Sequence int    `json:"sequence"`
	}
	_ = json.Unmarshal(body, &req)
	c := Call{Op: OpCardContent, CardID: cardID, Element: element, Sequence: req.Sequence, Content: req.Content}
	if s.refuse(w, c, true) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	card := s.sequenced(w, &c, req.Sequence)
	if card == nil {
		return
	}
	if _, ok := card.Elements[element]; !ok {
		c.Refused = true
		s.record(c)
		writeJSON(w, 400, map[string]any{"code": 300302, "msg": "element not found"})
		return
	}
	card.Sequence = req.Sequence
	card.Elements[element] = req.Content
	s.record(c)
	writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]any{}})
}

func (s *Server) cardSettings(w http.ResponseWriter, cardID string, body []byte) {
	var req struct {
		Settings string `json:"settings"`
		UUID     string `json:"uuid"`
		Sequence int    `json:"sequence"`
	}
	_ = json.Unmarshal(body, &req)
	c := Call{Op: OpCardSettings, CardID: cardID, Sequence: req.Sequence, Content: req.Settings}
	if s.refuse(w, c, true) {
		return
	}
	var settings struct {
		Config *struct {
			StreamingMode *bool `json:"streaming_mode"`
			Summary       *struct {
				Content string `json:"content"`
			} `json:"summary"`
		} `json:"config"`
	}
	if json.Unmarshal([]byte(req.Settings), &settings) != nil {
		writeJSON(w, 400, map[string]any{"code": 300301, "msg": "settings is not valid json"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	card := s.sequenced(w, &c, req.Sequence)
	if card == nil {
		return
	}
	card.Sequence = req.Sequence
	if cfg := settings.Config; cfg != nil {
		if cfg.StreamingMode != nil {
			card.Streaming = *cfg.StreamingMode
		}
		if cfg.Summary != nil {
			card.Summary = cfg.Summary.Content
		}
	}
	s.record(c)
	writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]any{}})
}

func (s *Server) patchMessage(w http.ResponseWriter, id string, body []byte) {
	var req struct {
		Content string `json:"content"`
	}
	_ = json.Unmarshal(body, &req)
	c := Call{Op: OpPatch, MessageID: id, Content: contentText("interactive", req.Content)}
	if s.refuse(w, c, false) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msgIndex[id]
	switch {
	case m == nil && s.saidBySomeone(id):
		c.Refused = true
		s.record(c)
		writeJSON(w, 400, map[string]any{"code": CodeNotSender, "msg": "The operator is not the sender of the message"})
		return
	case m == nil || m.deleted:
		c.Refused = true
		s.record(c)
		writeJSON(w, 400, map[string]any{"code": 230011, "msg": "The message was withdrawn or not found"})
		return
	case m.msgType != "interactive" || m.cardID != "" || !m.multi:
		// Only a shared card (update_multi) sent as JSON can be patched.
		c.Refused = true
		s.record(c)
		writeJSON(w, 400, map[string]any{"code": 230099, "msg": "the message is not a shared card and cannot be updated"})
		return
	}
	m.text, m.patches = c.Content, m.patches+1
	s.record(c)
	writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]any{}})
}

func (s *Server) deleteMessage(w http.ResponseWriter, id string) {
	c := Call{Op: OpDelete, MessageID: id}
	if s.refuse(w, c, false) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msgIndex[id]
	if m == nil || m.deleted {
		c.Refused = true
		s.record(c)
		writeJSON(w, 400, map[string]any{"code": 230011, "msg": "The message was withdrawn or not found"})
		return
	}
	m.deleted = true
	s.record(c)
	writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]any{}})
}

// sentCard reads the card entity a message's content names, and whether
// an interactive card's JSON is shared (config.update_multi).
func sentCard(msgType, content string) (cardID string, multi bool) {
	if msgType != "interactive" {
		return "", false
	}
	var ref struct {
		Type string `json:"type"`
		Data struct {
			CardID string `json:"card_id"`
		} `json:"data"`
		Config struct {
			UpdateMulti bool `json:"update_multi"`
		} `json:"config"`
	}
	_ = json.Unmarshal([]byte(content), &ref)
	if ref.Type == "card" {
		return ref.Data.CardID, false
	}
	return "", ref.Config.UpdateMulti
}
