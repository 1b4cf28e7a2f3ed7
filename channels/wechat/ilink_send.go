package wechat

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/retry"
)

// send delivers a reply over iLink, split into phone-sized chunks.
func (s *ilinkSide) send(ctx context.Context, m channels.Message, text string) error {
	a, ok, err := s.adapter.opts.State.Account(ctx, m.Workspace)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("wechat: iLink bot %s is not logged in", m.Workspace)
	}
	chunks := splitChars(channels.PlainText(text), s.adapter.cfg.ChunkChars)
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
