package wechat

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/retry"
)

// DefaultWeComWSURL is the WeCom AI bot long-connection endpoint.
const DefaultWeComWSURL = "wss://openws.work.weixin.qq.com"

// WeCom long-connection commands.
const (
	cmdSubscribe = "aibot_subscribe"
	cmdCallback  = "aibot_msg_callback"
	cmdEvent     = "aibot_event_callback"
	cmdRespond   = "aibot_respond_msg"
	cmdSend      = "aibot_send_msg"
	cmdPing      = "ping"

	// streamLimit is below the 20480-byte limit of one stream content.
	streamLimit = 20000
	// pushLimit is the size of one aibot_send_msg markdown message.
	pushLimit = 4000
	// typingContent is the first stream frame while a turn runs.
	typingContent = "…"
	// maxMissedPings ends a connection whose heartbeats go unanswered.
	maxMissedPings = 2
	maxWSFrame     = 4 << 20
)

// wsFrame is one frame in either direction: {cmd, headers:{req_id}, body},
// and WeCom's answers {headers:{req_id}, errcode, errmsg}.
type wsFrame struct {
	Cmd     string `json:"cmd,omitempty"`
	Headers struct {
		ReqID string `json:"req_id"`
	} `json:"headers"`
	Body    json.RawMessage `json:"body,omitempty"`
	ErrCode int             `json:"errcode,omitempty"`
	ErrMsg  string          `json:"errmsg,omitempty"`
}

type outFrame struct {
	Cmd     string            `json:"cmd"`
	Headers map[string]string `json:"headers"`
	Body    any               `json:"body,omitempty"`
}

// wecomCallback is the body of aibot_msg_callback.
type wecomCallback struct {
	MsgID    string `json:"msgid"`
	AIBotID  string `json:"aibotid"`
	ChatID   string `json:"chatid"`
	ChatType string `json:"chattype"`
	From     struct {
		UserID string `json:"userid"`
	} `json:"from"`
	MsgType string `json:"msgtype"`
	Text    struct {
		Content string `json:"content"`
	} `json:"text"`
	Voice struct {
		Content string `json:"content"`
	} `json:"voice"`
	Mixed struct {
		Items []struct {
			MsgType string `json:"msgtype"`
			Text    struct {
				Content string `json:"content"`
			} `json:"text"`
		} `json:"msg_item"`
	} `json:"mixed"`
}

// wecomJob is a reply (or a typing frame) made on a replica without the
// connection, queued in Redis for the holder.
type wecomJob struct {
	Kind   string `json:"kind"` // reply or typing
	ReqID  string `json:"req_id"`
	ChatID string `json:"chatid"`
	RecvMS int64  `json:"recv_ms"`
	Text   string `json:"text,omitempty"`
}

// wecomSide holds one WeCom AI bot's long connection on the replica that
// wins its lease, and answers from any replica.
type wecomSide struct {
	adapter *Adapter
	log     *slog.Logger // with the transport and the bot
	bot     string
	outbox  string // Redis list of wecomJob

	mu      sync.Mutex
	conn    *wecomConn // live, subscribed connection; nil otherwise
	holding bool       // this replica holds the lease
	since   time.Time  // when the connection was lost while holding

	reqMu    sync.Mutex
	reqLocks map[string]*reqState
}

type reqState struct {
	mu       sync.Mutex
	users    int
	finished bool
}

func newWeComSide(a *Adapter) *wecomSide {
	bot := a.cfg.WeComBotID
	return &wecomSide{
		adapter:  a,
		log:      a.log.With("via", ViaWeCom, "bot", bot),
		bot:      bot,
		outbox:   a.opts.Prefix + "wechat:wecom:{" + bot + "}:outbox",
		reqLocks: map[string]*reqState{},
	}
}

func (s *wecomSide) run(ctx context.Context, h channels.Handler) {
	l := &lease{client: s.adapter.opts.Client, key: leaseKey(s.adapter.opts.Prefix, ViaWeCom, s.bot), ttl: s.adapter.opts.LeaseTTL, log: s.adapter.log}
	l.hold(ctx, func(lctx context.Context) {
		s.setHolding(true)
		defer s.setHolding(false)
		s.connectLoop(lctx, h)
	})
}

func (s *wecomSide) setHolding(v bool) {
	s.mu.Lock()
	s.holding = v
	s.since = time.Now()
	s.mu.Unlock()
}

func (s *wecomSide) setConn(c *wecomConn) {
	s.mu.Lock()
	s.conn = c
	if c == nil {
		s.since = time.Now()
	}
	s.mu.Unlock()
	s.adapter.setUp(ViaWeCom, c != nil)
}

func (s *wecomSide) current() *wecomConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn
}

// ready is degraded while this replica holds the lease without a live
// connection for longer than a reconnect normally takes.
func (s *wecomSide) ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holding && s.conn == nil && time.Since(s.since) > s.adapter.opts.RetryMin*3 {
		return fmt.Errorf("WeCom bot %s: long connection down since %s (reconnecting)", s.bot, s.since.Format(time.RFC3339))
	}
	return nil
}

// connectLoop keeps a subscribed connection until ctx ends (the lease is
// lost or the channel stops), reconnecting on the channels' backoff.
func (s *wecomSide) connectLoop(ctx context.Context, h channels.Handler) {
	channels.Reconnect{
		Channel: Name, What: "WeCom long connection",
		Backoff: retry.Backoff{Min: s.adapter.opts.RetryMin, Max: s.adapter.opts.RetryMax},
		Metrics: s.adapter.m, Log: s.log,
	}.Run(ctx, func(ctx context.Context) (bool, error) { return s.session(ctx, h) })
}

// session runs one connection: dial, subscribe, then read frames, ping and
// drain the reply queue until the connection drops or ctx ends. connected
// reports whether the subscription succeeded.
func (s *wecomSide) session(ctx context.Context, h channels.Handler) (connected bool, err error) {
	dialer := websocket.Dialer{HandshakeTimeout: 15 * time.Second, Proxy: websocket.DefaultDialer.Proxy}
	ws, _, err := dialer.DialContext(ctx, s.adapter.cfg.WeComWSURL, nil)
	if err != nil {
		s.adapter.apiError("network")
		return false, fmt.Errorf("dial %s: %w", s.adapter.cfg.WeComWSURL, err)
	}
	ws.SetReadLimit(maxWSFrame)
	conn := &wecomConn{ws: ws, side: s, adapter: s.adapter, log: s.log, pending: map[string]chan wsFrame{}, closed: make(chan struct{}), wake: make(chan struct{}, 1)}
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		s.setConn(nil)
		cancel()
		conn.close()
		wg.Wait()
		conn.tasks.Wait()
	}()
	readErr := make(chan error, 1)
	wg.Go(func() { readErr <- conn.read(sctx) })
	wg.Go(func() { conn.submitLoop(sctx, h) })

	ack, err := conn.request(sctx, cmdSubscribe, map[string]string{"bot_id": s.bot, "secret": s.adapter.cfg.WeComSecret.Reveal()})
	if err != nil {
		return false, fmt.Errorf("subscribe: %w", err)
	}
	if ack.ErrCode != 0 {
		s.adapter.apiError(wecomCode(ack.ErrCode))
		return false, fmt.Errorf("%w (check WECOM_BOT_ID and WECOM_BOT_SECRET): subscribe: errcode %d %s", channels.ErrRefused, ack.ErrCode, ack.ErrMsg)
	}
	s.log.Info("WeCom long connection subscribed on this replica")
	s.setConn(conn)
	wg.Go(func() { conn.heartbeat(sctx) })
	wg.Go(func() { s.drainOutbox(sctx, conn) })
	select {
	case err = <-readErr:
	case <-ctx.Done():
		err = ctx.Err()
	}
	return true, err
}

// errConnClosed means a frame could not go out (or its answer could not
// come back) because the connection ended; the reply is queued again for
// the next connection.
var errConnClosed = errors.New("wechat: WeCom connection closed")

// errKicked means WeCom closed the connection because another one
// subscribed the same bot: not a replica of ours (they share the lease),
// so Reconnect does not fight over it every second.
var errKicked = fmt.Errorf("wechat: WeCom closed this connection: %w", channels.ErrReplaced)

// wecomCodes are the WeCom errcodes the code label of
// parley_channel_api_errors_total names; every other errcode is counted as
// "other" (and logged with its number), so the label's values stay a
// fixed set.
var wecomCodes = map[int]string{
	40058:  "40058",  // aibot_subscribe refused: wrong bot id or secret
	846609: "846609", // aibot_respond_msg: the req_id can no longer be answered
}

// wecomCode is the code label of a WeCom errcode.
func wecomCode(errcode int) string {
	if label, ok := wecomCodes[errcode]; ok {
		return label
	}
	return "other"
}

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
		var f wsFrame
		if err := json.Unmarshal(raw, &f); err != nil {
			c.adapter.reject("bad_frame")
			c.log.Warn("undecodable WeCom frame", "err", err, "bytes", len(raw))
			continue
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
			if ev.Event.Type == "disconnected_event" {
				c.close()
				return errKicked
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
	}
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

// onMessage turns aibot_msg_callback into a gateway message.
func (s *wecomSide) onMessage(ctx context.Context, c *wecomConn, f wsFrame) {
	var b wecomCallback
	if err := json.Unmarshal(f.Body, &b); err != nil {
		s.adapter.reject("bad_frame")
		s.log.Warn("undecodable WeCom message", "err", err)
		return
	}
	reqID := f.Headers.ReqID
	if reqID == "" || b.MsgID == "" || b.From.UserID == "" || (b.ChatType == "group" && b.ChatID == "") {
		s.adapter.reject("missing_fields")
		s.log.Warn("WeCom message without req_id, msgid, sender or chat; ignored")
		return
	}
	group := b.ChatType == "group"
	var text string
	switch b.MsgType {
	case "text":
		text = b.Text.Content
	case "mixed":
		var parts []string
		for _, it := range b.Mixed.Items {
			if it.MsgType == "text" && strings.TrimSpace(it.Text.Content) != "" {
				parts = append(parts, it.Text.Content)
			}
		}
		text = strings.Join(parts, "\n")
	case "voice":
		text = b.Voice.Content
	}
	if group {
		text = stripMention(text)
	}
	text = strings.TrimSpace(text)
	chat := b.From.UserID
	if group {
		chat = b.ChatID
	}
	recv := time.Now()
	if text == "" {
		s.adapter.reject("unsupported")
		c.tasks.Go(func() { s.noteUnsupported(ctx, c, reqID, chat, b.MsgID, recv) })
		return
	}
	bot := s.bot
	if b.AIBotID != "" {
		bot = b.AIBotID
	}
	m := channels.Message{
		ID:        ViaWeCom + ":" + b.MsgID,
		Channel:   Name,
		Workspace: bot,
		Chat:      chat,
		User:      b.From.UserID,
		Text:      text,
		DM:        !group,
		Received:  recv,
		Meta: map[string]string{
			"via": ViaWeCom, "req_id": reqID, "chatid": chat,
			"recv_ms": strconv.FormatInt(recv.UnixMilli(), 10),
		},
	}
	c.submit(m)
}

func (s *wecomSide) noteUnsupported(ctx context.Context, c *wecomConn, reqID, chat, msgID string, recv time.Time) {
	first, err := s.adapter.opts.Client.SetNX(ctx, s.adapter.opts.Prefix+"wechat:wecom:{"+s.bot+"}:noted:"+msgID, 1, 24*time.Hour).Result()
	if err != nil || !first {
		return
	}
	if err := s.deliver(ctx, c, wecomJob{Kind: "reply", ReqID: reqID, ChatID: chat, RecvMS: recv.UnixMilli(), Text: unsupportedNote}); err != nil {
		s.log.Warn("could not send the unsupported-message note", "err", err)
	}
}

func jobFor(m channels.Message, kind, text string) wecomJob {
	ms, _ := strconv.ParseInt(m.Meta["recv_ms"], 10, 64)
	chat := m.Meta["chatid"]
	if chat == "" {
		chat = m.Chat
	}
	return wecomJob{Kind: kind, ReqID: m.Meta["req_id"], ChatID: chat, RecvMS: ms, Text: text}
}

// send answers m: directly when this replica holds the connection, else
// through the Redis queue the holder drains.
func (s *wecomSide) send(ctx context.Context, m channels.Message, text string) error {
	job := jobFor(m, "reply", text)
	if c := s.current(); c != nil {
		err := s.deliver(ctx, c, job)
		if !errors.Is(err, errConnClosed) {
			return err
		}
		s.log.Info("WeCom connection closed while answering; queueing the answer for the next connection")
	}
	return s.enqueue(ctx, job)
}

// typing opens the answer's stream with a placeholder frame, so the user
// sees that the bot is working.
func (s *wecomSide) typing(ctx context.Context, m channels.Message) {
	job := jobFor(m, "typing", "")
	if c := s.current(); c != nil {
		if err := s.deliver(ctx, c, job); err != nil {
			s.log.Debug("WeCom typing frame", "err", err)
		}
		return
	}
	if err := s.enqueue(ctx, job); err != nil {
		s.log.Debug("queue WeCom typing frame", "err", err)
	}
}

func (s *wecomSide) enqueue(ctx context.Context, job wecomJob) error {
	raw, err := json.Marshal(job)
	if err != nil {
		return err
	}
	_, err = s.adapter.opts.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.RPush(ctx, s.outbox, raw)
		p.Expire(ctx, s.outbox, time.Hour)
		return nil
	})
	if err != nil {
		return fmt.Errorf("wechat: queue WeCom reply: %w", err)
	}
	return nil
}

// drainOutbox delivers the replies other replicas queued, while this
// replica holds the connection.
func (s *wecomSide) drainOutbox(ctx context.Context, c *wecomConn) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		res, err := s.adapter.opts.Client.BLPop(ctx, time.Second, s.outbox).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("read the WeCom reply queue", "err", err)
				retry.Sleep(ctx, s.adapter.opts.RetryMin)
			}
			continue
		}
		var job wecomJob
		if len(res) != 2 || json.Unmarshal([]byte(res[1]), &job) != nil || job.ChatID == "" {
			s.adapter.reject("bad_frame")
			continue
		}
		wg.Go(func() {
			err := s.deliver(ctx, c, job)
			if err == nil {
				return
			}
			if job.Kind == "reply" && (errors.Is(err, errConnClosed) || ctx.Err() != nil) {
				// The connection ended under it: the next holder sends it.
				qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				if qerr := s.enqueue(qctx, job); qerr == nil {
					return
				}
			}
			s.log.Error("deliver a queued WeCom reply", "err", err)
		})
	}
}

// lockReq serialises the frames of one req_id on this replica.
func (s *wecomSide) lockReq(reqID string) (*reqState, func()) {
	s.reqMu.Lock()
	st, ok := s.reqLocks[reqID]
	if !ok {
		st = &reqState{}
		s.reqLocks[reqID] = st
	}
	st.users++
	s.reqMu.Unlock()
	st.mu.Lock()
	return st, func() {
		st.mu.Unlock()
		s.reqMu.Lock()
		st.users--
		if st.users == 0 && !st.finished {
			delete(s.reqLocks, reqID)
		}
		s.reqMu.Unlock()
	}
}

// forget drops the finished marks of old req_ids.
func (s *wecomSide) forget() {
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	if len(s.reqLocks) < 1024 {
		return
	}
	for id, st := range s.reqLocks {
		if st.users == 0 {
			delete(s.reqLocks, id)
		}
	}
}

// streamID is the same for every frame of one req_id on any replica.
func streamID(reqID string) string {
	sum := sha256.Sum256([]byte(reqID))
	return "parley-" + hex.EncodeToString(sum[:8])
}

func streamBody(reqID, content string, finish bool) map[string]any {
	return map[string]any{"msgtype": "stream", "stream": map[string]any{"id": streamID(reqID), "finish": finish, "content": content}}
}

// deliver sends a job over c. A reply streams with aibot_respond_msg on the
// message's req_id — cumulative content in chunk steps, finish:true on the
// last frame — and falls back to aibot_send_msg when the req_id is too old
// or WeCom refuses it.
func (s *wecomSide) deliver(ctx context.Context, c *wecomConn, job wecomJob) error {
	age := time.Since(time.UnixMilli(job.RecvMS))
	st, unlock := s.lockReq(job.ReqID)
	defer unlock()
	if job.Kind == "typing" {
		if st.finished || job.ReqID == "" || age > s.adapter.opts.ReqIDTTL || age > time.Minute {
			return nil
		}
		return s.respond(ctx, c, job.ReqID, typingContent, false)
	}
	defer s.forget()
	st.finished = true
	text := strings.TrimSpace(job.Text)
	if text == "" {
		text = "…"
	}
	parts := channels.Split(text, streamLimit)
	if job.ReqID != "" && age < s.adapter.opts.ReqIDTTL {
		steps := splitChars(parts[0], s.adapter.cfg.ChunkChars)
		var err error
		shown := ""
		for i, step := range steps {
			if shown != "" {
				shown += "\n\n"
			}
			shown += step
			if err = s.respond(ctx, c, job.ReqID, shown, i == len(steps)-1); err != nil {
				break
			}
		}
		if err == nil {
			return s.push(ctx, c, job.ChatID, parts[1:])
		}
		if errors.Is(err, errConnClosed) || ctx.Err() != nil {
			return err
		}
		s.log.Warn("WeCom refused the streamed answer; sending it as a new message", "err", err)
	}
	return s.push(ctx, c, job.ChatID, parts)
}

func (s *wecomSide) respond(ctx context.Context, c *wecomConn, reqID, content string, finish bool) error {
	ack, err := c.call(ctx, cmdRespond, reqID, streamBody(reqID, content, finish))
	if err != nil {
		return err
	}
	if ack.ErrCode != 0 {
		s.adapter.apiError(wecomCode(ack.ErrCode))
		return fmt.Errorf("aibot_respond_msg: errcode %d %s", ack.ErrCode, ack.ErrMsg)
	}
	return nil
}

// push sends parts as new markdown messages with aibot_send_msg.
func (s *wecomSide) push(ctx context.Context, c *wecomConn, chatID string, parts []string) error {
	for _, part := range parts {
		for _, chunk := range channels.Split(part, pushLimit) {
			ack, err := c.request(ctx, cmdSend, map[string]any{"chatid": chatID, "msgtype": "markdown", "markdown": map[string]string{"content": chunk}})
			if err != nil {
				return fmt.Errorf("wechat: aibot_send_msg: %w", err)
			}
			if ack.ErrCode != 0 {
				s.adapter.apiError(wecomCode(ack.ErrCode))
				s.log.Error("WeCom aibot_send_msg failed", "errcode", ack.ErrCode, "errmsg", ack.ErrMsg)
				return fmt.Errorf("wechat: aibot_send_msg: errcode %d %s", ack.ErrCode, ack.ErrMsg)
			}
		}
	}
	return nil
}
