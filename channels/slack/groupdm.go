package slack

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	slackapi "github.com/slack-go/slack"
)

// maxKnownChannels bounds the channels whose kind is remembered; past it
// the memory starts over, costing one conversations.info per channel.
const maxKnownChannels = 10_000

// groupDMs remembers which channels are group DMs (mpim). A message event
// says so (channel_type), an app_mention does not; conversations.info
// does, once per channel, since a channel never changes kind.
type groupDMs struct {
	mu     sync.Mutex
	known  map[string]bool
	warned atomic.Bool // missing_scope was logged
}

// isGroupDM reports whether channel is a group DM, for the access rules:
// access.dms governs a group DM, access.chats a channel. A failed lookup
// is an error (the event is delivered again); an app without the scope
// to look is warned about once and its mentions taken as channel ones.
func (a *Adapter) isGroupDM(ctx context.Context, channel string) (bool, error) {
	if isDMChannel(channel) {
		return false, nil
	}
	g := &a.groupDMs
	g.mu.Lock()
	v, ok := g.known[channel]
	g.mu.Unlock()
	if ok {
		return v, nil
	}
	info, err := a.api.GetConversationInfoContext(ctx, &slackapi.GetConversationInfoInput{ChannelID: channel})
	var se slackapi.SlackErrorResponse
	switch {
	case errors.As(err, &se) && se.Err == "missing_scope":
		a.countAPIError(err)
		if !g.warned.Swap(true) {
			a.log.Warn("the Slack app may not call conversations.info (scopes channels:read, groups:read, mpim:read): a mention in a group DM is taken as a channel message, so access.dms does not apply to it")
		}
		v = false
	case err != nil:
		a.countAPIError(err)
		return false, fmt.Errorf("slack: conversations.info: %w", err)
	default:
		v = info.IsMpIM
	}
	g.mu.Lock()
	if g.known == nil || len(g.known) >= maxKnownChannels {
		g.known = map[string]bool{}
	}
	g.known[channel] = v
	g.mu.Unlock()
	return v, nil
}
