package feishu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/channels"
)

// Feishu's replies as the gateway's outbox posts them, one part at a time,
// paced over every replica and retried by whichever replica is alive.

var _ channels.Poster = (*Adapter)(nil)

// PostsPerSecond is Feishu's published rate of messages into one chat (5
// a second per user or group, shared by every bot and replica).
const PostsPerSecond = 5

// outboxPart is one part of a reply as Parts gives it and Post reads it:
// its index goes into the uuid, so a part tried again is dropped by
// Feishu when it was posted already, while a repeated paragraph at
// another index is not.
type outboxPart struct {
	Index int    `json:"i"`
	Text  string `json:"md"`
	// Mark remembers the thread as answered once the part is posted (not
	// for a notice), as Send does.
	Mark bool `json:"mark,omitempty"`
}

// Parts implements channels.Poster: the reply cut as Send cuts it.
func (a *Adapter) Parts(_ channels.Message, r channels.Reply) []string {
	chunks := channels.Split(r.Text, a.opts.ChunkBytes)
	parts := make([]string, 0, len(chunks))
	for i, c := range chunks {
		b, err := json.Marshal(outboxPart{Index: i, Text: c, Mark: !r.Notice})
		if err != nil {
			continue // a string always marshals
		}
		parts = append(parts, string(b))
	}
	return parts
}

// Post implements channels.Poster: one try at posting part as a card
// (plain text where the card is refused), with the uuid Send would give
// it, returning the id of the message made.
func (a *Adapter) Post(ctx context.Context, m channels.Message, part string) (string, error) {
	var p outboxPart
	if err := json.Unmarshal([]byte(part), &p); err != nil || p.Text == "" {
		return "", &channels.PostError{Err: errors.New("feishu: an outbox part that is not a Feishu part")}
	}
	id, err := a.postChunk(ctx, a.calls.Once(), false, m, p.Index, p.Text) // the outbox tries again, and logs it
	if err != nil {
		return "", postError(ctx, err)
	}
	if p.Mark {
		a.markAnswered(ctx, m, channels.Reply{})
		a.markRoot(ctx, m, id)
	}
	return id, nil
}

// postError classifies a failed post for the outbox: Feishu's retryable
// codes, 429s and 5xx, and a dropped connection may pass.
func postError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return &channels.PostError{Retry: apiErr.Retryable(), Err: err}
	}
	return &channels.PostError{Retry: true, Err: fmt.Errorf("feishu: post: %w", err)}
}

// Pace implements channels.Poster: five posts a second per chat.
func (a *Adapter) Pace() channels.Pace {
	return channels.Pace{Every: time.Second / PostsPerSecond, Burst: 1}
}

// markRoot follows the thread a post at a group's top level starts (a
// trigger's root: an alert group's thread), as a thread the bot answered
// in: people replying to it are answered without a mention.
func (a *Adapter) markRoot(ctx context.Context, m channels.Message, id string) {
	if m.DM || !a.cfg.FollowThreads || id == "" || m.Meta[MetaThreadKey] != "" || m.Meta[MetaMessageID] != "" {
		return
	}
	if err := a.state.markThread(ctx, m.Chat+":"+id, a.opts.ThreadTTL); err != nil {
		a.log.Warn("cannot remember the thread of a post; replies to it will need a mention", "err", err)
	}
}
