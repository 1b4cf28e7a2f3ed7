package officialaccount

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wxapi"
)

// MessageLimit is the size of one text message, passive or
// customer-service, in bytes. A longer answer goes out as several
// customer-service messages.
const MessageLimit = 2048

// maxHeld is how many answers are kept for a user whose window is closed.
const maxHeld = 3

// API paths.
const (
	customPath = "/cgi-bin/message/custom/send"
	typingPath = "/cgi-bin/message/custom/typing"
)

// heldNote starts an answer delivered after the window had closed.
const heldNote = "An earlier answer could not reach you: an Official Account may only write to you within 48 hours of your last message. Here it is now.\n\n"

// ErrWindowClosed means WeChat refused a customer-service message because
// the user's 48-hour window is closed (or the account's message quota for
// it is spent). The answer is kept and delivered, with a note, when the
// user writes again.
var ErrWindowClosed = errors.New("wechat_oa: the user's 48-hour reply window is closed; the answer is kept for their next message")

// Send implements channels.Channel. The answer to a message whose callback
// is still waiting becomes its passive reply (if it fits one); otherwise
// it goes out as customer-service messages. Answers held by a closed
// window go first.
func (a *Adapter) Send(ctx context.Context, m channels.Message, r channels.Reply) error {
	text := strings.TrimSpace(channels.PlainText(r.Text))
	if text == "" {
		text = "…"
	}
	a.deliverHeld(ctx, m.Chat)
	if id := m.Meta[MetaMsgID]; id != "" {
		handed, err := a.passive.handoff(ctx, id, text, len(text) <= MessageLimit)
		if err != nil {
			return err
		}
		if handed {
			return nil
		}
	}
	return a.sendCustom(ctx, m.Chat, text, true)
}

// sendCustom sends text to user as customer-service messages of at most
// MessageLimit bytes. When the window is closed, what was not sent is
// kept for the user's return (if hold) and ErrWindowClosed returned.
func (a *Adapter) sendCustom(ctx context.Context, user, text string, hold bool) error {
	parts := channels.Split(text, MessageLimit)
	for i, part := range parts {
		body := map[string]any{"touser": user, "msgtype": "text", "text": map[string]string{"content": part}}
		err := a.api.Call(ctx, "message/custom/send", customPath, body, nil)
		if err == nil {
			continue
		}
		if !windowClosed(err) {
			return fmt.Errorf("wechat_oa: %w (part %d of %d)", err, i+1, len(parts))
		}
		if hold {
			if herr := a.hold(ctx, user, strings.Join(parts[i:], "\n\n")); herr != nil {
				return fmt.Errorf("%w; keeping it failed too: %w", ErrWindowClosed, herr)
			}
			a.log.Warn("the user's reply window is closed; the answer is kept for their next message", "err", err)
		}
		return fmt.Errorf("%w (%w)", ErrWindowClosed, err)
	}
	return nil
}

func windowClosed(err error) bool {
	var apiErr *wxapi.APIError
	return errors.As(err, &apiErr) && (apiErr.Code == codeWindowClosed || apiErr.Code == codeSendLimit)
}

// heldKey is the list of answers kept for user.
func (a *Adapter) heldKey(user string) string {
	return a.opts.Prefix + Name + ":held:{" + a.cfg.AppID + ":" + user + "}"
}

// hold keeps text for user, the newest maxHeld answers for HeldTTL.
func (a *Adapter) hold(ctx context.Context, user, text string) error {
	key := a.heldKey(user)
	_, err := a.opts.Redis.TxPipelined(context.WithoutCancel(ctx), func(p redis.Pipeliner) error {
		p.RPush(ctx, key, text)
		p.LTrim(ctx, key, -maxHeld, -1)
		p.PExpire(ctx, key, a.opts.HeldTTL)
		return nil
	})
	return err
}

// takeHeldScript reads and deletes the held answers in one step, so that
// two replicas answering the same user deliver them once.
var takeHeldScript = redis.NewScript(`
local held = redis.call('LRANGE', KEYS[1], 0, -1)
redis.call('DEL', KEYS[1])
return held
`)

// deliverHeld sends the answers kept for user, now that they wrote again
// (their window is open), each with a note saying why it comes late.
func (a *Adapter) deliverHeld(ctx context.Context, user string) {
	held, err := takeHeldScript.Run(ctx, a.opts.Redis, []string{a.heldKey(user)}).StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		a.log.Warn("read the answers kept for a closed window", "err", err)
		return
	}
	for i, text := range held {
		err := a.sendCustom(ctx, user, heldNote+text, false)
		if err == nil {
			continue
		}
		a.log.Warn("deliver an answer kept for a closed window", "err", err)
		for _, rest := range held[i:] {
			if herr := a.hold(ctx, user, rest); herr != nil {
				a.log.Error("an answer kept for a closed window is lost", "err", herr)
			}
		}
		return
	}
}

// Posts implements channels.PostCounter: how many customer-service
// messages Send makes of text.
func (a *Adapter) Posts(_ channels.Message, text string) int {
	return max(len(channels.Split(strings.TrimSpace(channels.PlainText(text)), MessageLimit)), 1)
}

var _ channels.Unanswered = (*Adapter)(nil)

// LeftUnanswered implements channels.Unanswered: the callback still
// waiting for m's answer (a quiet refusal: no reply will come) is told to
// answer empty at once, which WeChat shows as nothing, rather than holding
// WeChat's request to its deadline. A retry of the callback is then
// answered empty too (the message is settled).
func (a *Adapter) LeftUnanswered(ctx context.Context, m channels.Message) {
	id := m.Meta[MetaMsgID]
	if id == "" {
		return
	}
	if _, err := a.passive.handoff(ctx, id, "", false); err != nil {
		a.log.Warn("could not end the callback of an unanswered message; it answers empty at its deadline", "err", err)
	}
}
