package feishu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/parleyhq/parley/channels/feishu/internal/wsproto"
	"github.com/parleyhq/parley/retry"
)

// The long connection.
//
// The SDK's ws.Client cannot be contained: Start ends in `select {}` and
// never returns, ignores its context, keeps the *websocket.Conn in an
// unexported field, dials with the package-global websocket.DefaultDialer
// and http.DefaultClient, and its ping loop re-spawns itself forever. Every
// Start would leak at least two goroutines and an open connection for the
// life of the process, and its connect/disconnect is only visible in log
// lines, so neither shutdown nor readiness could work.
//
// So this file drives the same protocol itself with the SDK's wire types,
// written out in internal/wsproto — the endpoint answer (EndpointResp,
// ClientConfig), the protobuf frame (Frame, Headers, NewPingFrame), the
// response (Response) and the constants — and hands every event payload to
// the dispatch the HTTP callback uses as well. Every goroutine here is owned
// by one connection and ends before runLongConnection returns.

// wsDefaults are used until the server's ClientConfig says otherwise.
const (
	wsDefaultPing = 2 * time.Minute
	wsMaxParts    = 64
	wsPartsTTL    = 5 * time.Second
)

// errClient marks an endpoint or handshake refusal that retrying soon
// will not fix (bad credentials, banned, connection limit).
type errClient struct{ err error }

func (e errClient) Error() string { return e.err.Error() }
func (e errClient) Unwrap() error { return e.err }

// runLongConnection keeps one long connection open until ctx ends.
func (a *Adapter) runLongConnection(ctx context.Context) {
	retry.Reconnect{
		Integration: Name, What: "long connection",
		Backoff: retry.Backoff{Min: a.opts.ReconnectMin, Max: a.opts.ReconnectMax},
		Metrics: a.m, Log: a.log,
	}.Run(ctx, func(ctx context.Context) (bool, error) {
		connected, err := a.connectOnce(ctx)
		if ctx.Err() == nil {
			a.setConnected(false, err)
		}
		var refused errClient
		if errors.As(err, &refused) {
			err = fmt.Errorf("%w (check app_id/app_secret and the app's event subscription mode): %w", retry.ErrRefused, err)
		}
		return connected, err
	})
}

// endpoint asks POST {base}/callback/ws/endpoint for the WebSocket URL.
func (a *Adapter) endpoint(ctx context.Context) (string, *wsproto.ClientConfig, error) {
	body, _ := json.Marshal(map[string]string{"AppID": a.cfg.AppID, "AppSecret": a.cfg.AppSecret.Reveal()})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+wsproto.GenEndpointUri, bytes.NewReader(body))
	if err != nil {
		return "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("locale", "zh")
	resp, err := a.http.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			a.m.ChannelAPIErrors.WithLabelValues(Name, "network").Inc()
		}
		return "", nil, fmt.Errorf("endpoint: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", nil, fmt.Errorf("endpoint: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		a.m.ChannelAPIErrors.WithLabelValues(Name, "http_"+strconv.Itoa(resp.StatusCode)).Inc()
		return "", nil, fmt.Errorf("endpoint: http %d", resp.StatusCode)
	}
	var ep wsproto.EndpointResp
	if err := json.Unmarshal(raw, &ep); err != nil {
		return "", nil, fmt.Errorf("endpoint: %w", err)
	}
	switch ep.Code {
	case wsproto.OK:
	case wsproto.SystemBusy, wsproto.InternalError:
		a.m.ChannelAPIErrors.WithLabelValues(Name, strconv.Itoa(ep.Code)).Inc()
		return "", nil, fmt.Errorf("endpoint: code %d: %s", ep.Code, ep.Msg)
	default:
		a.m.ChannelAPIErrors.WithLabelValues(Name, strconv.Itoa(ep.Code)).Inc()
		return "", nil, errClient{fmt.Errorf("endpoint: code %d: %s", ep.Code, ep.Msg)}
	}
	if ep.Data == nil || ep.Data.Url == "" {
		return "", nil, errors.New("endpoint: no URL in the answer")
	}
	return ep.Data.Url, ep.Data.ClientConfig, nil
}

// wsConn is one open connection and what its goroutines share.
type wsConn struct {
	conn      *websocket.Conn
	serviceID int32
	wmu       sync.Mutex // one writer at a time

	mu    sync.Mutex
	ping  time.Duration
	parts map[string]*partial
}

type partial struct {
	bufs    [][]byte
	expires time.Time
}

func (w *wsConn) write(data []byte) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	_ = w.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return w.conn.WriteMessage(websocket.BinaryMessage, data)
}

func (w *wsConn) configure(cc *wsproto.ClientConfig) {
	if cc == nil || cc.PingInterval <= 0 {
		return
	}
	w.mu.Lock()
	w.ping = time.Duration(cc.PingInterval) * time.Second
	w.mu.Unlock()
}

func (w *wsConn) pingInterval() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ping
}

// connectOnce opens one connection and serves it until it fails or ctx
// ends. connected reports whether the handshake succeeded.
func (a *Adapter) connectOnce(ctx context.Context) (connected bool, err error) {
	rawURL, cc, err := a.endpoint(ctx)
	if err != nil {
		return false, err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return false, fmt.Errorf("endpoint URL: %w", err)
	}
	dialer := websocket.Dialer{HandshakeTimeout: 15 * time.Second, Proxy: http.ProxyFromEnvironment}
	conn, resp, err := dialer.DialContext(ctx, rawURL, nil)
	if err != nil {
		if resp != nil {
			code, _ := strconv.Atoi(resp.Header.Get(wsproto.HeaderHandshakeStatus))
			msg := resp.Header.Get(wsproto.HeaderHandshakeMsg)
			authCode, _ := strconv.Atoi(resp.Header.Get(wsproto.HeaderHandshakeAuthErrCode))
			herr := fmt.Errorf("handshake: http %d, status %d: %s", resp.StatusCode, code, msg)
			if code == wsproto.Forbidden || (code == wsproto.AuthFailed && authCode == wsproto.ExceedConnLimit) {
				return false, errClient{herr}
			}
			return false, herr
		}
		return false, fmt.Errorf("dial: %w", err)
	}
	sid, _ := strconv.ParseInt(u.Query().Get(wsproto.ServiceID), 10, 32)
	conn.SetReadLimit(4 << 20)
	w := &wsConn{conn: conn, serviceID: int32(sid), ping: wsDefaultPing, parts: map[string]*partial{}}
	w.configure(cc)
	a.setConnected(true, nil)
	a.log.Info("long connection open", "conn_id", u.Query().Get(wsproto.DeviceID))

	connCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Closing the connection is the only way to end a blocked read.
	wg.Go(func() {
		<-connCtx.Done()
		w.wmu.Lock()
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		w.wmu.Unlock()
		_ = conn.Close()
	})
	wg.Go(func() { a.pingLoop(connCtx, w) })
	err = a.readLoop(connCtx, w, &wg)
	cancel()
	wg.Wait()
	return true, err
}

// pingLoop sends the protocol's ping frame every ping interval.
func (a *Adapter) pingLoop(ctx context.Context, w *wsConn) {
	for {
		if err := w.write(mustMarshal(wsproto.NewPingFrame(w.serviceID))); err != nil {
			return // the read loop sees the broken connection
		}
		if !retry.Sleep(ctx, w.pingInterval()) {
			return
		}
	}
}

func mustMarshal(f *wsproto.Frame) []byte {
	b, _ := f.Marshal()
	return b
}

// readLoop reads frames until the connection fails. Data frames are
// handled concurrently (each must be answered within 3 s) on goroutines
// tracked by wg.
func (a *Adapter) readLoop(ctx context.Context, w *wsConn, wg *sync.WaitGroup) error {
	for {
		// Silence for three ping intervals means the connection is dead.
		_ = w.conn.SetReadDeadline(time.Now().Add(3*w.pingInterval() + 10*time.Second))
		mt, data, err := w.conn.ReadMessage()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("read: %w", err)
		}
		if mt != websocket.BinaryMessage {
			continue
		}
		var f wsproto.Frame
		if err := f.Unmarshal(data); err != nil {
			a.log.Warn("long connection: undecodable frame", "err", err)
			continue
		}
		switch wsproto.FrameType(f.Method) {
		case wsproto.FrameTypeControl:
			hs := wsproto.Headers(f.Headers)
			if wsproto.MessageType(hs.GetString(wsproto.HeaderType)) == wsproto.MessageTypePong && len(f.Payload) > 0 {
				var cc wsproto.ClientConfig
				if json.Unmarshal(f.Payload, &cc) == nil {
					w.configure(&cc)
				}
			}
		case wsproto.FrameTypeData:
			wg.Go(func() { a.handleDataFrame(ctx, w, f) })
		}
	}
}

// handleDataFrame dispatches one event and answers the frame.
func (a *Adapter) handleDataFrame(ctx context.Context, w *wsConn, f wsproto.Frame) {
	hs := wsproto.Headers(f.Headers)
	switch wsproto.MessageType(hs.GetString(wsproto.HeaderType)) {
	case wsproto.MessageTypeEvent, wsproto.MessageTypeCard:
		// Card clicks (card.action.trigger) come as events; a frame
		// typed card is read the same way.
	default:
		return
	}
	payload := f.Payload
	if sum := hs.GetInt(wsproto.HeaderSum); sum > 1 {
		payload = w.combine(hs.GetString(wsproto.HeaderMessageID), sum, hs.GetInt(wsproto.HeaderSeq), payload)
		if payload == nil {
			return
		}
	}
	start := time.Now()
	status := http.StatusOK
	var data []byte // a card click's answer
	if !isJSONObject(payload) {
		a.m.MessagesRejected.WithLabelValues(Name, ReasonBadRequest).Inc()
		a.log.Warn("long connection: event is not a JSON object")
	} else {
		// Not cut short by a lost connection: once queueing has begun it
		// finishes (bounded), like an HTTP callback whose client went away.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.SubmitTimeout)
		var err error
		if isCardAction(payload) {
			data, err = a.cardAction(dctx, payload)
		} else {
			err = a.dispatch(dctx, payload)
		}
		cancel()
		switch {
		case errors.Is(err, errMalformedEvent):
			a.log.Warn("malformed event refused", "err", err)
			status = http.StatusBadRequest
		case err != nil:
			a.log.Error("event not accepted; Feishu will push it again", "err", err)
			status = http.StatusInternalServerError
		}
	}
	hs.Add(wsproto.HeaderBizRt, strconv.FormatInt(time.Since(start).Milliseconds(), 10))
	answer := wsproto.NewResponseByCode(status)
	if status == http.StatusOK {
		answer.Data = data
	}
	resp, _ := json.Marshal(answer)
	f.Headers = hs
	f.Payload = resp
	if err := w.write(mustMarshal(&f)); err != nil && ctx.Err() == nil {
		a.log.Warn("long connection: cannot answer an event frame", "err", err)
	}
}

// combine collects the parts of a split event; nil until all arrived.
func (w *wsConn) combine(id string, sum, seq int, part []byte) []byte {
	if sum > wsMaxParts || seq < 0 || seq >= sum {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for k, p := range w.parts {
		if now.After(p.expires) {
			delete(w.parts, k)
		}
	}
	p := w.parts[id]
	if p == nil || len(p.bufs) != sum {
		p = &partial{bufs: make([][]byte, sum)}
		w.parts[id] = p
	}
	p.bufs[seq] = part
	p.expires = now.Add(wsPartsTTL)
	var all []byte
	for _, b := range p.bufs {
		if b == nil {
			return nil
		}
		all = append(all, b...)
	}
	delete(w.parts, id)
	return all
}
