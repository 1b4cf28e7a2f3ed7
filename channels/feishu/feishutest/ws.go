package feishutest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/websocket"

	"github.com/parleyhq/parley/channels/feishu/internal/wsproto"
)

// The long connection: the WebSocket a Feishu app in websocket mode
// holds, over which events are pushed in frames and acknowledged.

var upgrader = websocket.Upgrader{}

func (s *Server) acceptWS(w http.ResponseWriter, r *http.Request) {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	p := &wsPeer{conn: conn, waiting: map[string]chan wsproto.Response{}, app: r.URL.Query().Get("app")}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return
	}
	s.conns[p] = true
	s.mu.Unlock()
	select {
	case s.connCh <- struct{}{}:
	default:
	}
	defer func() {
		s.mu.Lock()
		delete(s.conns, p)
		s.mu.Unlock()
		conn.Close()
	}()
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		var f wsproto.Frame
		if f.Unmarshal(data) != nil {
			continue
		}
		hs := wsproto.Headers(f.Headers)
		switch wsproto.FrameType(f.Method) {
		case wsproto.FrameTypeControl:
			if wsproto.MessageType(hs.GetString(wsproto.HeaderType)) == wsproto.MessageTypePing {
				p.mu.Lock()
				p.pings++
				p.mu.Unlock()
				pong := wsproto.Frame{Method: int32(wsproto.FrameTypeControl), Service: f.Service,
					Headers: []wsproto.Header{{Key: wsproto.HeaderType, Value: string(wsproto.MessageTypePong)}}}
				b, _ := pong.Marshal()
				p.wmu.Lock()
				_ = conn.WriteMessage(websocket.BinaryMessage, b)
				p.wmu.Unlock()
			}
		case wsproto.FrameTypeData:
			var resp wsproto.Response
			_ = json.Unmarshal(f.Payload, &resp)
			id := hs.GetString(wsproto.HeaderMessageID)
			p.mu.Lock()
			ch := p.waiting[id]
			delete(p.waiting, id)
			p.mu.Unlock()
			if ch != nil {
				ch <- resp
			}
		}
	}
}

// WaitConnected waits until a long connection is open.
func (s *Server) WaitConnected(ctx context.Context) error {
	for {
		if s.Connections() > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.connCh:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Push sends an event over a long connection as a data frame (split in
// parts parts when parts > 1) and returns the code the client answered.
func (s *Server) Push(ctx context.Context, event []byte, parts int) (int, error) {
	resp, err := s.push(ctx, event, parts)
	return resp.StatusCode, err
}

// push sends event as Push does and returns the client's whole answer.
func (s *Server) push(ctx context.Context, event []byte, parts int) (wsproto.Response, error) {
	return s.pushTo(ctx, nil, event, parts)
}

// pushTo sends event on the first long connection that to accepts (any,
// when to is nil).
func (s *Server) pushTo(ctx context.Context, to func(*wsPeer) bool, event []byte, parts int) (wsproto.Response, error) {
	s.mu.Lock()
	var peers []*wsPeer
	for _, p := range s.peersLocked() {
		if to == nil || to(p) {
			peers = append(peers, p)
		}
	}
	s.frameSeq++
	seq := s.frameSeq
	s.mu.Unlock()
	if len(peers) == 0 {
		return wsproto.Response{}, errors.New("feishutest: no long connection")
	}
	p := peers[0]
	id := fmt.Sprintf("frame-%d", seq)
	ch := make(chan wsproto.Response, 1)
	p.mu.Lock()
	p.waiting[id] = ch
	p.mu.Unlock()
	if parts < 1 {
		parts = 1
	}
	size := (len(event) + parts - 1) / parts
	for i := 0; i < parts; i++ {
		lo, hi := i*size, min((i+1)*size, len(event))
		f := wsproto.Frame{SeqID: seq, Method: int32(wsproto.FrameTypeData), Service: 7, Headers: []wsproto.Header{
			{Key: wsproto.HeaderType, Value: string(wsproto.MessageTypeEvent)},
			{Key: wsproto.HeaderMessageID, Value: id},
			{Key: wsproto.HeaderSum, Value: strconv.Itoa(parts)},
			{Key: wsproto.HeaderSeq, Value: strconv.Itoa(i)},
			{Key: wsproto.HeaderTraceID, Value: "trace"},
		}, Payload: event[lo:hi]}
		b, _ := f.Marshal()
		p.wmu.Lock()
		err := p.conn.WriteMessage(websocket.BinaryMessage, b)
		p.wmu.Unlock()
		if err != nil {
			return wsproto.Response{}, err
		}
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-ctx.Done():
		return wsproto.Response{}, ctx.Err()
	}
}

// Pings counts the ping frames received on all current connections.
func (s *Server) Pings() int {
	s.mu.Lock()
	peers := s.peersLocked()
	s.mu.Unlock()
	n := 0
	for _, p := range peers {
		p.mu.Lock()
		n += p.pings
		p.mu.Unlock()
	}
	return n
}

// DropConnections closes every long connection from the server side.
func (s *Server) DropConnections() {
	s.mu.Lock()
	peers := s.peersLocked()
	s.mu.Unlock()
	for _, p := range peers {
		p.conn.Close()
	}
}
