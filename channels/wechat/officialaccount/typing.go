package officialaccount

import (
	"context"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/retry"
)

// StartTyping implements channels.Typing: once the passive window has
// passed with the turn still running, the user sees "typing"
// (message/custom/typing), renewed every TypingEvery while WeChat allows
// it — within TypingWindow of the user's message. A turn that answers in
// time shows nothing: the passive reply comes first. Sending the answer
// ends the indicator.
func (a *Adapter) StartTyping(ctx context.Context, m channels.Message) (stop func()) {
	if m.Meta[MetaMsgID] == "" || m.Received.IsZero() {
		return func() {}
	}
	tctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	if !a.bg.Go(func(bg context.Context) {
		defer close(done)
		unlink := context.AfterFunc(bg, cancel)
		defer unlink()
		a.typingLoop(tctx, m)
	}) {
		cancel()
		return func() {}
	}
	return func() {
		cancel()
		<-done
	}
}

func (a *Adapter) typingLoop(ctx context.Context, m channels.Message) {
	at := m.Received.Add(a.opts.PassiveWait)
	for {
		if !retry.Sleep(ctx, at.Sub(a.opts.Now())) {
			return
		}
		if a.opts.Now().Sub(m.Received) >= a.opts.TypingWindow {
			return
		}
		body := map[string]string{"touser": m.Chat, "command": "Typing"}
		if err := a.api.CallWith(ctx, a.typing, "message/custom/typing", typingPath, body, nil); err != nil && ctx.Err() == nil {
			a.log.Debug("typing indicator", "err", err)
		}
		at = at.Add(a.opts.TypingEvery)
	}
}
