package wechattest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"
)

// WeComHost is one WeCom long-connection address serving several AI bots,
// as WeCom's own does: a connection belongs to the bot its aibot_subscribe
// names, and is then that bot's fake's (each WeCom checks its own secret,
// records its own frames and pushes its own callbacks). A subscription
// naming no bot of the host is refused with errcode 40058, as WeCom
// refuses an unknown bot id.
type WeComHost struct {
	srv  *httptest.Server
	bots map[string]*WeCom

	mu    sync.Mutex
	conns []*websocket.Conn
}

// NewWeComHost starts the host in front of bots; it closes at cleanup.
func NewWeComHost(t testing.TB, bots ...*WeCom) *WeComHost {
	h := &WeComHost{bots: map[string]*WeCom{}}
	for _, b := range bots {
		h.bots[b.BotID] = b
	}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		h.serve(ws)
	}))
	t.Cleanup(func() {
		h.mu.Lock()
		for _, c := range h.conns {
			c.Close()
		}
		h.mu.Unlock()
		h.srv.Close()
	})
	return h
}

// URL is the ws:// address every bot connects to.
func (h *WeComHost) URL() string { return "ws" + strings.TrimPrefix(h.srv.URL, "http") }

// serve reads the connection's first frame and hands the connection to
// the bot it subscribes, relaying frames both ways until either side
// closes.
func (h *WeComHost) serve(client *websocket.Conn) {
	h.track(client)
	defer client.Close()
	_, first, err := client.ReadMessage()
	if err != nil {
		return
	}
	var fr Frame
	_ = json.Unmarshal(first, &fr)
	var sub struct {
		BotID string `json:"bot_id"`
	}
	_ = json.Unmarshal(fr.Body, &sub)
	bot := h.bots[sub.BotID]
	if fr.Cmd != "aibot_subscribe" || bot == nil {
		_ = client.WriteJSON(map[string]any{"headers": map[string]string{"req_id": fr.Headers.ReqID}, "errcode": 40058, "errmsg": "invalid bot_id or secret"})
		return
	}
	backend, _, err := websocket.DefaultDialer.Dial(bot.URL(), nil)
	if err != nil {
		return
	}
	h.track(backend)
	defer backend.Close()
	if err := backend.WriteMessage(websocket.TextMessage, first); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		relay(client, backend)
	}()
	relay(backend, client)
	client.Close()
	backend.Close()
	<-done
}

// relay copies messages from one connection to the other until a read or
// a write fails, then closes the reader's peer so the other relay ends.
func relay(from, to *websocket.Conn) {
	defer to.Close()
	for {
		kind, raw, err := from.ReadMessage()
		if err != nil {
			return
		}
		if err := to.WriteMessage(kind, raw); err != nil {
			return
		}
	}
}

func (h *WeComHost) track(c *websocket.Conn) {
	h.mu.Lock()
	h.conns = append(h.conns, c)
	h.mu.Unlock()
}
