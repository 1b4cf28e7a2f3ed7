package gateway

import (
	"context"
	"log/slog"
	"slices"
	"unicode/utf8"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway/delivery"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
)

// capReply cuts an answer over the scope's limits.reply_chars or
// limits.reply_posts (counted the way rt's channel splits a reply), so that
// a runaway model cannot flood a channel with posts. The stored answer,
// the turn's last message, is cut the same way: the history holds what the
// user saw, note included.
func capReply(ctx context.Context, log *slog.Logger, rt delivery.Route, eff *policy.Effective, reply string, msgs []sessions.Message) (string, []sessions.Message) {
	l := eff.Limits()
	m := rt.Message()
	var posts func(string) int
	if rt.CountsPosts() {
		posts = rt.PostCount
	}
	cut, ok := channels.CapReply(reply, l.ReplyChars, l.ReplyPosts, posts)
	if !ok {
		return reply, msgs
	}
	log.WarnContext(ctx, "answer cut at the reply cap", "channel", m.Channel,
		"chars", utf8.RuneCountInString(reply), "kept", utf8.RuneCountInString(cut),
		"reply_chars", l.ReplyChars, "reply_posts", l.ReplyPosts)
	if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" && len(msgs[n-1].ToolCalls) == 0 {
		msgs = slices.Clone(msgs)
		msgs[n-1].Content = cut
	}
	return cut, msgs
}
