package wechat

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/parleyhq/parley/channels"
)

// The WeCom long connection itself: frames out and in, requests waiting
// for their answers, the heartbeat, and the hand-over to the gateway.

// wecomConn is one WebSocket connection.
type wecomConn struct {
	ws      *websocket.Conn
	side    *wecomSide
	adapter *Adapter
	log     *slog.Logger

	wmu     sync.Mutex // gorilla allows one writer at a time
	pmu     sync.Mutex
	pending map[string]chan wsFrame
	missed  atomic.Int32

	closeOnce sync.Once
	closed    chan struct{}

	// Messages go to the gateway from one goroutine, in arrival order,
	// so that the reader never waits on the gateway (which may answer at
	// once, and an answer waits for the reader to see WeCom's ack).
	qmu   sync.Mutex
	queue []channels.Message
	wake  chan struct{}
	tasks sync.WaitGroup
}

// submit queues m for the gateway.
func (c *wecomConn) submit(m channels.Message) {
	c.qmu.Lock()
	c.queue = append(c.queue, m)
	c.qmu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// submitLoop hands queued messages to the gateway until the session ends.
func (c *wecomConn) submitLoop(ctx context.Context, h channels.Handler) {
	for {
		c.qmu.Lock()
		var m channels.Message
		ok := len(c.queue) > 0
		if ok {
			m = c.queue[0]
			c.queue = c.queue[1:]
		}
		c.qmu.Unlock()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-c.wake:
			}
			continue
		}
		// A session that ended with messages still queued hands them over
		// anyway: WeCom will not deliver them again.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := h.Submit(sctx, m)
		cancel()
		if err != nil {
			c.adapter.reject("submit_failed")
			c.log.Error("the gateway did not take a WeCom message", "err", err)
		}
	}
}

func (c *wecomConn) close() {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.wmu.Lock()
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		c.wmu.Unlock()
		_ = c.ws.Close()
	})
}

func (c *wecomConn) write(f outFrame) error {
	raw, err := json.Marshal(f)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, raw)
}

func newReqID(cmd string) string {
	return cmd + "_" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "_" + randomToken()[:8]
}

// request sends a frame with a fresh req_id and waits for WeCom's answer.
func (c *wecomConn) request(ctx context.Context, cmd string, body any) (wsFrame, error) {
	return c.call(ctx, cmd, newReqID(cmd), body)
}

// call sends cmd on reqID and waits for the answer frame with that req_id.
// Callers serialise frames of one req_id (reqState), so one waiter per
// req_id is enough.
func (c *wecomConn) call(ctx context.Context, cmd, reqID string, body any) (wsFrame, error) {
	ch := make(chan wsFrame, 1)
	c.pmu.Lock()
	c.pending[reqID] = ch
	c.pmu.Unlock()
	defer func() {
		c.pmu.Lock()
		delete(c.pending, reqID)
		c.pmu.Unlock()
	}()
	select {
	case <-c.closed:
		return wsFrame{}, fmt.Errorf("%s: %w", cmd, errConnClosed)
	default:
	}
	c.adapter.m.PlatformCalls.WithLabelValues(Name, cmd).Inc()
	if err := c.write(outFrame{Cmd: cmd, Headers: map[string]string{"req_id": reqID}, Body: body}); err != nil {
		return wsFrame{}, fmt.Errorf("write %s: %w (%v)", cmd, errConnClosed, err)
	}
	t := time.NewTimer(c.adapter.opts.AckTimeout)
	defer t.Stop()
	select {
	case f := <-ch:
		return f, nil
	case <-t.C:
		return wsFrame{}, fmt.Errorf("%s: no answer from WeCom within %s", cmd, c.adapter.opts.AckTimeout)
	case <-c.closed:
		return wsFrame{}, fmt.Errorf("%s: %w", cmd, errConnClosed)
	case <-ctx.Done():
		return wsFrame{}, ctx.Err()
	}
}

// heartbeat pings every PingInterval; two unanswered pings end the
// connection.
func (c *wecomConn) heartbeat(ctx context.Context) {
	t := time.NewTicker(c.adapter.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.closed:
			return
		case <-t.C:
		}
		if c.missed.Load() >= maxMissedPings {
			c.log.Warn("WeCom heartbeats unanswered; reconnecting")
			c.close()
			return
		}
		c.missed.Add(1)
		if err := c.write(outFrame{Cmd: cmdPing, Headers: map[string]string{"req_id": newReqID(cmdPing)}}); err != nil {
			c.close()
			return
		}
	}
}

// read handles every inbound frame until the connection ends. Bad frames
// are logged and counted and never end the loop.
func (c *wecomConn) read(ctx context.Context) error {
	for {
		kind, raw, err := c.ws.ReadMessage()
		if err != nil {
			c.close()
			return err
		}
		if kind != websocket.TextMessage && kind != websocket.BinaryMessage {
			continue
		}
		if err := c.dispatch(ctx, raw); err != nil {
			c.close()
			return err
		}
	}
}

// dispatch handles one frame from WeCom; errKicked ends the session.
func (c *wecomConn) dispatch(ctx context.Context, raw []byte) error {
	var f wsFrame
	if err := json.Unmarshal(raw, &f); err != nil {
		c.adapter.reject("bad_frame")
		c.log.Warn("undecodable WeCom frame", "err", err, "bytes", len(raw))
		return nil
	}
	switch f.Cmd {
	case cmdCallback:
		c.side.onMessage(ctx, c, f)
	case cmdEvent:
		var ev struct {
			Event struct {
				Type string `json:"eventtype"`
			} `json:"event"`
		}
		_ = json.Unmarshal(f.Body, &ev)
		switch ev.Event.Type {
		case "disconnected_event":
			return errKicked
		case eventCardClick:
			c.side.onCardClick(c, f)
			return nil
		}
		c.log.Debug("WeCom event ignored", "event", ev.Event.Type)
	case "":
		c.answer(f)
	case cmdPing:
		c.missed.Store(0)
	default:
		c.adapter.reject("unknown_cmd")
		c.log.Warn("unknown WeCom command ignored", "cmd", f.Cmd)
	}
	return nil
}

// answer routes WeCom's answer frame to the request waiting for it.
func (c *wecomConn) answer(f wsFrame) {
	id := f.Headers.ReqID
	if strings.HasPrefix(id, cmdPing) {
		c.missed.Store(0)
		if f.ErrCode != 0 {
			c.adapter.apiError(wecomCode(f.ErrCode))
			c.log.Debug("WeCom refused a heartbeat", "errcode", f.ErrCode, "errmsg", f.ErrMsg)
		}
		return
	}
	c.pmu.Lock()
	ch, ok := c.pending[id]
	c.pmu.Unlock()
	if !ok {
		if id == "" {
			c.adapter.reject("missing_fields")
		}
		c.log.Debug("unexpected WeCom answer", "req_id", id, "errcode", f.ErrCode)
		return
	}
	select {
	case ch <- f:
	default:
	}
}
