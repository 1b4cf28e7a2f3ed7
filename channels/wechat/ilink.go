package wechat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/retry"
)

// unsupportedNote answers a message with nothing Parley can read.
const unsupportedNote = "Sorry, I can only read text, voice, images and files for now. Please send text."

// ilinkSide polls the stored iLink accounts and sends their replies.
type ilinkSide struct {
	adapter *Adapter
	log     *slog.Logger   // with the transport
	sends   *retry.Retrier // sendmessage
	tokens  *contextTokens

	mu        sync.Mutex
	running   map[string]bool // bots with a lease holder loop here
	expired   map[string]bool // bots whose session is expired, as last seen
	elsewhere map[string]bool // bots whose lease another replica held at the last try
}

func newILinkSide(a *Adapter) *ilinkSide {
	return &ilinkSide{
		adapter:   a,
		log:       a.log.With("via", ViaILink),
		sends:     retry.New(Name, retry.Policy{Attempts: a.opts.SendAttempts, MinWait: a.opts.RetryMin, MaxWait: a.opts.RetryMax}, a.m, a.log.With("via", ViaILink)),
		tokens:    &contextTokens{client: a.opts.Client, prefix: a.opts.Prefix},
		running:   map[string]bool{},
		expired:   map[string]bool{},
		elsewhere: map[string]bool{},
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
				l := &lease{client: s.adapter.opts.Client, key: leaseKey(s.adapter.opts.Prefix, ViaILink, bot), ttl: s.adapter.opts.LeaseTTL, log: s.adapter.log,
					elsewhere: func(v bool) { s.setElsewhere(bot, v) }}
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
	changed := s.expired[bot] != expired
	if expired {
		s.expired[bot] = true
	} else {
		delete(s.expired, bot)
	}
	s.mu.Unlock()
	if changed {
		s.adapter.showUp()
	}
}

// setElsewhere records whether another replica holds bot's lease.
func (s *ilinkSide) setElsewhere(bot string, v bool) {
	s.mu.Lock()
	changed := s.elsewhere[bot] != v
	s.elsewhere[bot] = v
	s.mu.Unlock()
	if changed {
		s.adapter.showUp()
	}
}

// heldElsewhere reports whether another replica polls one of the bots.
func (s *ilinkSide) heldElsewhere() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.elsewhere {
		if v {
			return true
		}
	}
	return false
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
	calls := s.adapter.m.PlatformCalls
	return &ilinkClient{http: s.adapter.opts.HTTP, baseURL: base, token: a.Token, calls: func(op string) {
		calls.WithLabelValues(Name, op).Inc()
	}}
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
	s.log.Error("the iLink session of this bot expired (errcode -14); polling is paused — run `"+s.adapter.loginCommand()+"` to log in again",
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
			Account:   s.adapter.opts.Account,
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
