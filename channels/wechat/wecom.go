package wechat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

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
	// Card is an approval prompt's template card, shown under the
	// finished text.
	Card json.RawMessage `json:"card,omitempty"`
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
	// elsewhere: another replica held the lease at the last try.
	elsewhere bool
	// refused is WeCom's refusal of the last subscription (wrong bot id
	// or secret), until one succeeds.
	refused error
	// peerRefused is the refusal the replica holding the lease recorded
	// in Redis, as read at the last try of the lease ("" when none).
	peerRefused string

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
	l := &lease{client: s.adapter.opts.Client, key: leaseKey(s.adapter.opts.Prefix, ViaWeCom, s.bot), ttl: s.adapter.opts.LeaseTTL, log: s.adapter.log,
		elsewhere: s.setElsewhere}
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

// setElsewhere records whether another replica holds the lease and, when
// one does, whether WeCom refuses its subscription: every replica then
// shows the account down, not only the holder.
func (s *wecomSide) setElsewhere(v bool) {
	peer := ""
	if v {
		ctx, cancel := context.WithTimeout(context.Background(), s.adapter.opts.LeaseTTL/3)
		peer, _ = s.adapter.opts.Client.Get(ctx, s.refusedKey()).Result() // unreadable: as none
		cancel()
	}
	s.mu.Lock()
	changed := s.elsewhere != v || s.peerRefused != peer
	s.elsewhere, s.peerRefused = v, peer
	s.mu.Unlock()
	if changed {
		s.adapter.showUp()
	}
}

// refusedKey holds the holder's record of WeCom's refusal, for the
// other replicas.
func (s *wecomSide) refusedKey() string {
	return s.adapter.opts.Prefix + "wechat:wecom:{" + s.bot + "}:refused"
}

// heldElsewhere reports whether another replica held the lease at the
// last try: that one holds the connection, and this one answers through
// the reply queue.
func (s *wecomSide) heldElsewhere() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.elsewhere
}

// setRefused records WeCom's refusal of a subscription (nil: one
// succeeded), here and in Redis for the replicas without the lease; the
// record outlives the holder's retries (at most RetryMax apart) and
// expires when it stops.
func (s *wecomSide) setRefused(err error) {
	s.mu.Lock()
	was := s.refused
	s.refused = err
	s.mu.Unlock()
	if err != nil || was != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var rerr error
		if err != nil {
			rerr = s.adapter.opts.Client.Set(ctx, s.refusedKey(), err.Error(), 3*max(s.adapter.opts.LeaseTTL, s.adapter.opts.RetryMax)).Err()
		} else {
			rerr = s.adapter.opts.Client.Del(ctx, s.refusedKey()).Err()
		}
		cancel()
		if rerr != nil {
			s.log.Warn("record the WeCom refusal for the other replicas", "err", rerr)
		}
	}
	s.adapter.showUp()
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
	if s.holding && s.conn == nil && s.refused != nil {
		return fmt.Errorf("WeCom bot %s: long connection refused (%w)", s.bot, s.refused)
	}
	if !s.holding && s.elsewhere && s.peerRefused != "" {
		return fmt.Errorf("WeCom bot %s: long connection refused on the replica holding it (%s)", s.bot, s.peerRefused)
	}
	if s.holding && s.conn == nil && time.Since(s.since) > s.adapter.opts.RetryMin*3 {
		return fmt.Errorf("WeCom bot %s: long connection down since %s (reconnecting)", s.bot, s.since.Format(time.RFC3339))
	}
	return nil
}

// connectLoop keeps a subscribed connection until ctx ends (the lease is
// lost or the channel stops), reconnecting on the channels' backoff.
func (s *wecomSide) connectLoop(ctx context.Context, h channels.Handler) {
	retry.Reconnect{
		Integration: Name, What: "WeCom long connection",
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
		err := fmt.Errorf("%w (check %s): subscribe: errcode %d %s", retry.ErrRefused, s.credentialKeys(), ack.ErrCode, ack.ErrMsg)
		s.setRefused(fmt.Errorf("errcode %d; check %s", ack.ErrCode, s.credentialKeys()))
		return false, err
	}
	s.log.Info("WeCom long connection subscribed on this replica")
	s.setRefused(nil)
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

// credentialKeys names where the bot's credentials are set, for an
// operator whose subscription WeCom refused.
func (s *wecomSide) credentialKeys() string {
	if a := s.adapter.opts.Account; a != "" {
		return "wechat.accounts." + a + ".wecom_bot_id and wecom_bot_secret"
	}
	return "WECOM_BOT_ID and WECOM_BOT_SECRET"
}

// errConnClosed means a frame could not go out (or its answer could not
// come back) because the connection ended; the reply is queued again for
// the next connection.
var errConnClosed = errors.New("wechat: WeCom connection closed")

// errKicked means WeCom closed the connection because another one
// subscribed the same bot: not a replica of ours (they share the lease),
// so Reconnect does not fight over it every second.
var errKicked = fmt.Errorf("wechat: WeCom closed this connection: %w", retry.ErrReplaced)

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
	// WeCom calls an AI bot back for the group messages that @mention it;
	// one that reaches it without any (text with no "@" at all) did not
	// address it: it is handed over as ambient, kept for the group's next
	// addressed turn, never answered.
	ambient := group && strings.TrimSpace(text) != "" && !strings.Contains(text, "@")
	if group {
		text = stripMention(text)
	}
	text = strings.TrimSpace(text)
	chat := b.From.UserID
	if group {
		chat = b.ChatID
	}
	recv := time.Now()
	bot := s.bot
	if b.AIBotID != "" {
		bot = b.AIBotID
	}
	m := channels.Message{
		ID:        ViaWeCom + ":" + b.MsgID,
		Channel:   Name,
		Account:   s.adapter.opts.Account,
		Workspace: bot,
		Chat:      chat,
		User:      b.From.UserID,
		Text:      text,
		DM:        !group,
		Ambient:   ambient,
		Received:  recv,
		Meta: map[string]string{
			"via": ViaWeCom, "req_id": reqID, "chatid": chat,
			"recv_ms": strconv.FormatInt(recv.UnixMilli(), 10),
		},
	}
	m.Attachments = wecomAttachments(f.Body, b.MsgID)
	if text == "" && len(m.Attachments) == 0 {
		// A voice message without a transcript, a video…: the gateway
		// answers with the note, on the req_id like any reply, if the
		// access rules admit the sender.
		m.Unsupported = unsupportedNote
	}
	c.submit(m)
}
