package wechat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/retry"
	"github.com/redis/go-redis/v9"
)

// unsupportedNote answers a message with nothing Parley can read.
const unsupportedNote = "Sorry, I can only read text, voice, images and files for now. Please send text."

// ilinkSide polls the stored iLink accounts and sends their replies.
type ilinkSide struct {
	adapter *Adapter
	log     *slog.Logger   // with the transport
	sends   *retry.Retrier // sendmessage
	tokens  *contextTokens

	mu      sync.Mutex
	running map[string]bool // bots with a lease holder loop here
	expired map[string]bool // bots whose session is expired, as last seen
}

func newILinkSide(a *Adapter) *ilinkSide {
	return &ilinkSide{
		adapter: a,
		log:     a.log.With("via", ViaILink),
		sends:   retry.New(Name, retry.Policy{Attempts: a.opts.SendAttempts, MinWait: a.opts.RetryMin, MaxWait: a.opts.RetryMax}, a.m, a.log.With("via", ViaILink)),
		tokens:  &contextTokens{client: a.opts.Client, prefix: a.opts.Prefix},
		running: map[string]bool{},
		expired: map[string]bool{},
	}
}

// run re-reads the accounts every AccountRefresh and starts one lease loop
// per bot; each polls while this replica holds that bot's lease.
func (s *ilinkSide) run(ctx context.Context, h channels.Handler) {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(s.adapter.opts.AccountRefresh)
	defer t.Stop()
	for {
		accounts, err := s.adapter.opts.State.Accounts(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("read iLink accounts", "err", err)
		}
		for _, a := range accounts {
			s.setExpired(a.BotID, a.Expired)
			s.observeTokenAge(ctx, a.BotID)
			s.mu.Lock()
			start := !s.running[a.BotID]
			s.running[a.BotID] = true
			s.mu.Unlock()
			if start {
				bot := a.BotID
				l := &lease{client: s.adapter.opts.Client, key: leaseKey(s.adapter.opts.Prefix, ViaILink, bot), ttl: s.adapter.opts.LeaseTTL, log: s.adapter.log}
				wg.Go(func() {
					l.hold(ctx, func(lctx context.Context) { s.poll(lctx, bot, h) })
				})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *ilinkSide) setExpired(bot string, expired bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if expired {
		s.expired[bot] = true
	} else {
		delete(s.expired, bot)
	}
}

func (s *ilinkSide) expiredBots() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for bot := range s.expired {
		out = append(out, bot)
	}
	return out
}

func (s *ilinkSide) observeTokenAge(ctx context.Context, bot string) {
	at, ok, err := s.tokens.newest(ctx, bot)
	if err != nil || !ok {
		return
	}
	s.adapter.m.WeChatTokenAge.WithLabelValues(bot).Set(time.Since(at).Seconds())
}

func (s *ilinkSide) client(a Account) *ilinkClient {
	base := a.BaseURL
	if base == "" {
		base = s.adapter.cfg.ILinkBaseURL
	}
	return &ilinkClient{http: s.adapter.opts.HTTP, baseURL: base, token: a.Token}
}

// poll is the receive loop of one bot while this replica holds its lease:
// long polls one after another, and after a failed one the next on the
// channels' backoff.
func (s *ilinkSide) poll(ctx context.Context, bot string, h channels.Handler) {
	key := ViaILink + ":" + bot
	defer s.adapter.setUp(key, false)
	log := s.log.With("bot", bot)
	log.Info("polling iLink bot on this replica")
	longPoll := time.Duration(defaultLongPollMS) * time.Millisecond
	retry.Reconnect{
		Integration: Name, What: "iLink long poll",
		Backoff: retry.Backoff{Min: s.adapter.opts.RetryMin, Max: s.adapter.opts.RetryMax},
		Metrics: s.adapter.m, Log: log,
	}.Run(ctx, func(ctx context.Context) (bool, error) {
		return s.pollUntilFailure(ctx, bot, log, h, &longPoll)
	})
}

// pollUntilFailure polls until a poll fails or ctx ends; healthy reports
// that at least one poll was answered. The cursor is saved only after the
// whole batch was handed to the gateway: a crash in between re-delivers
// the batch, and the gateway's de-duplication on message_id keeps it from
// being answered twice. An expired session waits for a new login without
// failing.
func (s *ilinkSide) pollUntilFailure(ctx context.Context, bot string, log *slog.Logger, h channels.Handler, longPoll *time.Duration) (healthy bool, err error) {
	key := ViaILink + ":" + bot
	state := s.adapter.opts.State
	for ctx.Err() == nil {
		a, ok, err := state.Account(ctx, bot)
		if err != nil {
			return healthy, fmt.Errorf("read iLink account: %w", err)
		}
		if !ok || a.Expired {
			s.adapter.setUp(key, false)
			s.setExpired(bot, ok)
			retry.Sleep(ctx, s.adapter.opts.AccountRefresh)
			continue
		}
		s.setExpired(bot, false)
		cursor, err := state.Cursor(ctx, bot)
		if err != nil {
			return healthy, fmt.Errorf("read iLink cursor: %w", err)
		}
		// The server holds the poll for up to longpolling_timeout_ms; a
		// client timeout a little later is an empty batch, not an error.
		pctx, cancel := context.WithTimeout(ctx, *longPoll+5*time.Second)
		resp, err := s.client(a).getUpdates(pctx, cursor)
		timedOut := pctx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return healthy, ctx.Err()
		case err != nil && timedOut:
			continue
		case err != nil:
			s.pollFailed(ctx, a, err)
			s.adapter.setUp(key, false)
			return healthy, err
		}
		s.adapter.setUp(key, true)
		healthy = true
		if resp.LongPollingMS > 0 {
			*longPoll = time.Duration(resp.LongPollingMS) * time.Millisecond
		}
		if err := s.handleBatch(ctx, a, resp.Msgs, h); err != nil {
			// The cursor stays where it was: the batch is polled again.
			return healthy, fmt.Errorf("a batch could not be handed to the gateway; polling it again: %w", err)
		}
		if resp.Cursor != "" && resp.Cursor != cursor {
			if err := state.SaveCursor(context.WithoutCancel(ctx), bot, resp.Cursor); err != nil {
				log.Warn("save iLink cursor; the batch may be delivered again", "err", err)
			}
		}
	}
	return healthy, ctx.Err()
}

// pollFailed counts a failed getupdates; errcode -14 marks the session
// expired, which pauses polling until the operator logs in again.
// Reconnect logs the failure.
func (s *ilinkSide) pollFailed(ctx context.Context, a Account, err error) {
	s.adapter.apiError(errorCode(err))
	var ae *apiError
	if errors.As(err, &ae) && (ae.ErrCode == ilinkErrExpired || ae.Ret == ilinkErrExpired) {
		s.expire(ctx, a)
		return
	}
	var he *httpError
	if errors.As(err, &he) && errors.Is(he.Err, errBadBody) {
		s.adapter.reject("bad_frame")
	}
}

// expire pauses a bot whose session iLink ended (errcode -14). The expiry
// is recorded before /readyz reports it: whoever sees the replica degraded
// and runs `parley wechat status` must find the session expired there too.
func (s *ilinkSide) expire(ctx context.Context, a Account) {
	if err := s.adapter.opts.State.MarkExpired(context.WithoutCancel(ctx), a.BotID, a.Token); err != nil {
		s.log.Warn("record the expired iLink session", "bot", a.BotID, "err", err)
	}
	s.log.Error("the iLink session of this bot expired (errcode -14); polling is paused — run `parley wechat login` to log in again",
		"bot", a.BotID)
	s.setExpired(a.BotID, true)
}

// handleBatch hands every usable message of a batch to the gateway. It
// fails only when the gateway refused one (then the batch is polled again).
func (s *ilinkSide) handleBatch(ctx context.Context, a Account, msgs []json.RawMessage, h channels.Handler) error {
	for _, raw := range msgs {
		var m ilinkMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			s.adapter.reject("bad_frame")
			s.log.Warn("skipping an undecodable iLink message", "bot", a.BotID, "err", err)
			continue
		}
		if m.MessageType == ilinkMsgBot {
			continue // our own (or another bot's) message: never answer it
		}
		id := m.id()
		if id == "" || m.FromUserID == "" {
			s.adapter.reject("missing_fields")
			s.log.Warn("skipping an iLink message without message_id or from_user_id", "bot", a.BotID)
			continue
		}
		// A group message belongs to the group: its own conversation,
		// under the group's access rules (access.chats), answered there
		// with the group's newest context token; not a DM of its sender.
		chat, dm := m.FromUserID, true
		if m.GroupID != "" {
			chat, dm = m.GroupID, false
		}
		if m.ContextToken != "" {
			if err := s.tokens.record(ctx, a.BotID, chat, m.ContextToken); err != nil {
				return fmt.Errorf("record context token: %w", err)
			}
			s.adapter.m.WeChatTokenAge.WithLabelValues(a.BotID).Set(0)
		}
		msg := channels.Message{
			ID:        ViaILink + ":" + a.BotID + ":" + id,
			Channel:   Name,
			Workspace: a.BotID,
			Chat:      chat,
			User:      m.FromUserID,
			Text:      messageText(m.ItemList),
			DM:        dm,
			Meta:      map[string]string{"via": ViaILink, "context_token": m.ContextToken},
		}
		msg.Attachments = ilinkAttachments(raw, a.BotID+":"+id)
		if msg.Text == "" && len(msg.Attachments) == 0 {
			// A video, a voice message without a transcript: the gateway
			// answers with the note if the access rules admit the sender;
			// a redelivered batch is a duplicate there.
			msg.Unsupported = unsupportedNote
		}
		if err := h.Submit(ctx, msg); err != nil {
			return err
		}
	}
	return nil
}

// messageText joins the text items and voice transcripts of a message.
func messageText(items []messageItem) string {
	var parts []string
	for _, it := range items {
		switch {
		case it.Type == ilinkItemText && it.TextItem != nil:
			parts = append(parts, it.TextItem.Text)
		case it.Type == ilinkItemVoice && it.VoiceItem != nil:
			parts = append(parts, it.VoiceItem.Text)
		}
	}
	return strings.TrimSpace(strings.Join(parts, "\n"))
}

// send delivers a reply over iLink, split into phone-sized chunks.
func (s *ilinkSide) send(ctx context.Context, m channels.Message, text string) error {
	a, ok, err := s.adapter.opts.State.Account(ctx, m.Workspace)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("wechat: iLink bot %s is not logged in", m.Workspace)
	}
	chunks := splitChars(PlainText(text), s.adapter.cfg.ChunkChars)
	return s.sendChunks(ctx, a, m.Chat, m.Meta["context_token"], chunks)
}

func (s *ilinkSide) sendChunks(ctx context.Context, a Account, user, fallbackToken string, chunks []string) error {
	cl := s.client(a)
	for i, chunk := range chunks {
		if err := s.sendOne(ctx, cl, a, user, fallbackToken, chunk); err != nil {
			return fmt.Errorf("wechat: iLink send (part %d of %d): %w", i+1, len(chunks), err)
		}
	}
	return nil
}

// sendOne sends one chunk with the newest context token of the user, on
// the retry loop. A non-zero ret is counted by its code; a stale token
// (ret -2) is tried once more, with the newest token and a fresh
// client_id; a 429 or 5xx, or a connection that could not be opened, is
// retried with the same client_id. A request that may have reached iLink
// (a timeout, a reset) is not sent again: a reply must not arrive twice.
func (s *ilinkSide) sendOne(ctx context.Context, cl *ilinkClient, a Account, user, fallbackToken, text string) error {
	st := newSendState()
	return s.sends.Do(ctx, "iLink sendmessage", func(ctx context.Context) (bool, time.Duration, error) {
		return s.attempt(ctx, cl, a, user, fallbackToken, text, st)
	})
}

// sendState is what the tries of one chunk share: its client_id, and
// whether a stale token was already tried again.
type sendState struct {
	clientID     string
	staleRetried bool
	// renewed is set by the try that found the token stale and chose a
	// new client_id: the next try is a new message, not a repeat.
	renewed bool
}

func newSendState() *sendState { return &sendState{clientID: "parley-" + randomToken()} }

// attempt makes one sendmessage call and classifies its failure for the
// retry loop: whether another try may succeed.
func (s *ilinkSide) attempt(ctx context.Context, cl *ilinkClient, a Account, user, fallbackToken, text string, st *sendState) (bool, time.Duration, error) {
	st.renewed = false
	token, _, err := s.tokens.latest(ctx, a.BotID, user)
	if err != nil {
		return false, 0, err
	}
	if token == "" {
		token = fallbackToken
	}
	err = cl.sendMessage(ctx, user, st.clientID, text, token)
	if err == nil {
		if n, err := s.tokens.countSend(ctx, a.BotID, user); err == nil {
			s.adapter.m.WeChatSendsSince.WithLabelValues(a.BotID).Observe(float64(n))
		}
		return false, 0, nil
	}
	if ctx.Err() != nil {
		return false, 0, err
	}
	s.adapter.apiError(errorCode(err))
	var ae *apiError
	var he *httpError
	switch {
	case errors.As(err, &ae) && (ae.Ret == ilinkErrExpired || ae.ErrCode == ilinkErrExpired):
		s.expire(ctx, a)
		return false, 0, retry.Mark(retry.ClientError, err)
	case ae != nil && (ae.Ret == ilinkRetStaleCtx || ae.ErrCode == ilinkRetStaleCtx):
		if st.staleRetried {
			s.log.Warn("the user's context token is stale: iLink only lets a bot answer shortly after the user's last message", "bot", a.BotID)
			return false, 0, retry.Mark(retry.ClientError, err)
		}
		st.staleRetried, st.renewed = true, true
		st.clientID = "parley-" + randomToken() // a new message, with the newest token
		return true, 0, retry.Mark(retry.ClientError, err)
	case ae != nil:
		return false, 0, retry.Mark(retry.ClientError, err)
	case errors.As(err, &he) && he.Status != 0:
		return retry.RetryableStatus(he.Status), 0, retry.Mark(retry.StatusReason(he.Status), err)
	case he != nil && isDialError(he.Err):
		return true, 0, retry.Mark(retry.Network, err)
	}
	return false, 0, err
}

// post makes one delivery of part for the outbox: one sendmessage, or two
// when the first finds the user's token stale (that one certainly made
// nothing). A failure says whether the outbox may try again: a 429, a 5xx
// or a connection never opened may pass; a refusal, an expired session or
// a request that may have reached iLink (a timeout) is not tried again.
func (s *ilinkSide) post(ctx context.Context, m channels.Message, part string) (string, error) {
	a, ok, err := s.adapter.opts.State.Account(ctx, m.Workspace)
	if err != nil {
		return "", &channels.PostError{Retry: true, Err: err}
	}
	if !ok {
		return "", &channels.PostError{Err: fmt.Errorf("wechat: iLink bot %s is not logged in", m.Workspace)}
	}
	cl, st := s.client(a), newSendState()
	for {
		again, after, err := s.attempt(ctx, cl, a, m.Chat, m.Meta["context_token"], part, st)
		switch {
		case err == nil:
			return st.clientID, nil
		case again && st.renewed:
			continue
		}
		return "", &channels.PostError{Retry: again, After: after, Err: fmt.Errorf("wechat: iLink send: %w", err)}
	}
}

// isDialError reports a connection that was never opened, so a request
// that certainly did not reach the server.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// startTyping shows "typing…" to the user until stop is called or the turn
// or the channel ends: getconfig for a typing_ticket, then sendtyping
// repeated every TypingInterval, and a cancel at the end.
func (s *ilinkSide) startTyping(ctx context.Context, m channels.Message) func() {
	if !m.DM {
		// A group: the typing ticket is per user (ilink_user_id), and a
		// group shows no one typing.
		return func() {}
	}
	a, ok, err := s.adapter.opts.State.Account(ctx, m.Workspace)
	if err != nil || !ok || a.Expired {
		return func() {}
	}
	runCtx := s.adapter.runContext()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var runDone <-chan struct{}
		if runCtx != nil {
			runDone = runCtx.Done()
		}
		cl := s.client(a)
		token, _, _ := s.tokens.latest(ctx, a.BotID, m.Chat)
		if token == "" {
			token = m.Meta["context_token"]
		}
		ticket, err := cl.getTypingTicket(ctx, m.Chat, token)
		if err != nil || ticket == "" {
			if err != nil && ctx.Err() == nil {
				s.adapter.apiError(errorCode(err))
				s.log.Debug("no typing ticket", "bot", a.BotID, "err", err)
			}
			return
		}
		t := time.NewTicker(s.adapter.opts.TypingInterval)
		defer t.Stop()
		for {
			if err := cl.sendTyping(ctx, m.Chat, ticket, ilinkTypingOn); err != nil && ctx.Err() == nil {
				s.adapter.apiError(errorCode(err))
				s.log.Debug("sendtyping", "bot", a.BotID, "err", err)
			}
			select {
			case <-t.C:
				continue
			case <-stop:
			case <-ctx.Done():
			case <-runDone:
			}
			break
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		_ = cl.sendTyping(cctx, m.Chat, ticket, ilinkTypingOff)
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(stop) })
		<-done
	}
}

// contextTokens keeps, per bot and user, the newest context_token with its
// time and the number of messages sent since the user last wrote. A sorted
// set beside the hash orders the users by their last message, so that a
// user idle past tokenTTL (whose token is long dead) is dropped when
// another writes: the hash holds only users heard from within tokenTTL,
// instead of every user the bot ever had while any one stays active.
type contextTokens struct {
	client redis.UniversalClient
	prefix string
	now    func() time.Time // time.Now unless a test sets it
}

// tokenTTL outlives iLink's reply window (24 h after the user's message).
const tokenTTL = 48 * time.Hour

// pruneBatch bounds the idle users one record drops, so a record stays
// cheap after a long pause; the next records drop the rest.
const pruneBatch = 100

func (t *contextTokens) key(bot string) string {
	return t.prefix + "wechat:ilink:{" + bot + "}:ctx"
}

func (t *contextTokens) seenKey(bot string) string {
	return t.prefix + "wechat:ilink:{" + bot + "}:ctx-seen"
}

func (t *contextTokens) newestKey(bot string) string {
	return t.prefix + "wechat:ilink:{" + bot + "}:ctx-newest"
}

// recordScript stores a user's token and drops up to ARGV[5] users idle
// past the token's life. The keys share the bot's hash tag.
var recordScript = redis.NewScript(`
local user, token, now, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 't:'..user, token, 'a:'..user, ARGV[3], 'n:'..user, 0)
redis.call('ZADD', KEYS[2], now, user)
local idle = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - ttl, 'LIMIT', 0, tonumber(ARGV[5]))
for _, u in ipairs(idle) do
  redis.call('HDEL', KEYS[1], 't:'..u, 'a:'..u, 'n:'..u)
  redis.call('ZREM', KEYS[2], u)
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('SET', KEYS[3], ARGV[3], 'PX', ttl)
return #idle
`)

func (t *contextTokens) record(ctx context.Context, bot, user, token string) error {
	now := time.Now
	if t.now != nil {
		now = t.now
	}
	return recordScript.Run(ctx, t.client, []string{t.key(bot), t.seenKey(bot), t.newestKey(bot)},
		user, token, now().UnixMilli(), tokenTTL.Milliseconds(), pruneBatch).Err()
}

func (t *contextTokens) latest(ctx context.Context, bot, user string) (string, time.Time, error) {
	vals, err := t.client.HMGet(ctx, t.key(bot), "t:"+user, "a:"+user).Result()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("wechat: read context token: %w", err)
	}
	token, _ := vals[0].(string)
	ms, _ := vals[1].(string)
	n, _ := strconv.ParseInt(ms, 10, 64)
	var at time.Time
	if n > 0 {
		at = time.UnixMilli(n)
	}
	return token, at, nil
}

func (t *contextTokens) countSend(ctx context.Context, bot, user string) (int64, error) {
	return t.client.HIncrBy(ctx, t.key(bot), "n:"+user, 1).Result()
}

func (t *contextTokens) newest(ctx context.Context, bot string) (time.Time, bool, error) {
	ms, err := t.client.Get(ctx, t.newestKey(bot)).Int64()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	return time.UnixMilli(ms), true, nil
}

// NewestContextToken reports when the newest context_token of an iLink
// bot arrived (false when none is known), for `parley wechat status`.
func NewestContextToken(ctx context.Context, client redis.UniversalClient, prefix, bot string) (time.Time, bool, error) {
	return (&contextTokens{client: client, prefix: prefix}).newest(ctx, bot)
}
