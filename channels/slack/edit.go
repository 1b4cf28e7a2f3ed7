package slack

import (
	"context"
	"fmt"
	"net/url"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/retry"
)

var _ channels.Editor = (*Adapter)(nil)

// Edit implements channels.Editor: one chat.update of the message ts in
// m's channel to part (mrkdwn, as Parts renders it). Slack answers
// message_not_found for a ts it does not know and cant_update_message
// for a message the bot did not post; both are final. A failure is
// counted by Slack's error code and classified like a post's.
func (a *Adapter) Edit(ctx context.Context, m channels.Message, ts, part string) error {
	form := url.Values{"token": {a.cfg.BotToken.Reveal()}, "channel": {m.Chat}, "ts": {ts}, "text": {part}}
	var ans postedAnswer
	err := a.postForm(ctx, "chat.update", form, &ans)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("slack: chat.update: %w", err)
	}
	f := a.failed(err)
	return &channels.PostError{Retry: f.retry, After: f.retryAfter, Err: retry.Mark(f.reason, fmt.Errorf("slack: chat.update: %w", err))}
}
