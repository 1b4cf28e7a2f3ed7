package slacktest

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gorilla/websocket"
)

// Socket Mode: the WebSocket an app in Socket Mode holds, which delivers
// envelopes and takes their acknowledgements.

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &wsConn{conn: conn, app: r.URL.Query().Get("app")}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return
	}
	s.conns = append(s.conns, c)
	n := len(s.conns)
	s.mu.Unlock()
	c.write(map[string]any{"type": "hello", "num_connections": n, "connection_info": map[string]string{"app_id": "A0PARLEY"},
		"debug_info": map[string]any{"host": "slacktest"}})
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			conn.Close()
			return
		}
		s.mu.Lock()
		s.acks = append(s.acks, json.RawMessage(data))
		s.mu.Unlock()
	}
}

func (c *wsConn) write(v any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn.WriteJSON(v)
}

// Connections reports how many Socket Mode connections were opened.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) latest() *wsConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) == 0 {
		return nil
	}
	return s.conns[len(s.conns)-1]
}

// latestOf is the newest connection app's app token opened.
func (s *Server) latestOf(app App) *wsConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.conns) - 1; i >= 0; i-- {
		if s.conns[i].app == app.BotUserID {
			return s.conns[i]
		}
	}
	return nil
}

// Send writes an envelope to the newest Socket Mode connection.
func (s *Server) Send(envelope any) error {
	c := s.latest()
	if c == nil {
		return fmt.Errorf("slacktest: no socket mode connection")
	}
	return c.write(envelope)
}

// SendEvent wraps an Events API payload in an events_api envelope and sends
// it on the newest connection.
func (s *Server) SendEvent(envelopeID string, payload any) error {
	return s.Send(map[string]any{"envelope_id": envelopeID, "type": "events_api", "payload": payload,
		"accepts_response_payload": false, "retry_attempt": 0, "retry_reason": ""})
}

// SendCommand sends a slash_commands envelope on the newest connection.
func (s *Server) SendCommand(envelopeID string, form map[string]string) error {
	return s.Send(map[string]any{"envelope_id": envelopeID, "type": "slash_commands", "payload": form,
		"accepts_response_payload": true})
}

// Disconnect asks the newest connection to reconnect, as Slack does before
// it rotates a connection.
func (s *Server) Disconnect() error {
	return s.Send(map[string]any{"type": "disconnect", "reason": "refresh_requested",
		"debug_info": map[string]any{"host": "slacktest"}})
}

// Acked reports whether an envelope was acknowledged.
func (s *Server) Acked(envelopeID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, raw := range s.acks {
		var a struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(raw, &a) == nil && a.EnvelopeID == envelopeID {
			return true
		}
	}
	return false
}
