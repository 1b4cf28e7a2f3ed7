package slack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/parleyhq/parley/channels"
)

// A post Slack made but whose answer was lost (a timeout, a 5xx after the
// write, a dropped connection) must not be made again. Each message
// Parley writes into a chat (a post, the first message of a live reply, a
// streamed message) carries message metadata: MetadataEventType and the
// part's delivery id. After such a failure, the next try first reads the
// newest messages of the thread back (conversations.replies, or
// conversations.history outside a thread, with include_all_metadata) and,
// when one carries the id, takes its ts instead of writing again. The
// look is bounded: messages of the last lookupWindow, lookupLimit a page,
// lookupPages pages. It needs the history scopes the manifest asks for; a
// workspace that refuses the look gets the post (a copy is better than no
// answer).

// MetadataEventType is the event type of the metadata Parley puts on the
// messages it posts.
const MetadataEventType = "parley_reply"

// Bounds of the look for a message an earlier try may have posted.
const (
	lookupWindow = 15 * time.Minute // past outbox.max_age, so a queued part's first try is still in it
	lookupLimit  = 20
	lookupPages  = 3
)

// marking is the metadata of a message written under key, as the Web API
// takes it.
func marking(key string) string {
	b, _ := json.Marshal(slackapi.SlackMetadata{EventType: MetadataEventType, EventPayload: map[string]any{"delivery_id": key}})
	return string(b)
}

// newDeliveryID is a fresh id for the parts of a reply Parley posts
// outside the outbox (whose items have ids of their own).
func newDeliveryID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// partKey is the delivery id of part i of the reply id.
func partKey(id string, i int) string { return id + "." + strconv.Itoa(i) }

// errUnreadAnswer is an answer that came but could not be read: the call
// may have been done.
var errUnreadAnswer = errors.New("unreadable answer")

// maybeWritten reports whether a failed write may have been done by Slack
// all the same: its answer is missing (a timeout, a reset, a context that
// ended in flight), unreadable, or a 5xx. A refusal, a rate limit or a
// connection never opened was not written.
func maybeWritten(err error) bool {
	var sc slackapi.StatusCodeError
	var op *net.OpError
	switch {
	case err == nil:
		return false
	case errors.As(err, &sc):
		return sc.Code >= 500
	case errors.As(err, &op) && op.Op == "dial":
		return false
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, errUnreadAnswer):
		return true
	}
	switch errorCode(err) {
	case "internal_error", "fatal_error", "request_timeout":
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// threadAnswer is what Parley reads of conversations.replies and
// conversations.history.
type threadAnswer struct {
	slackapi.SlackResponse
	Messages []struct {
		TS       string `json:"ts"`
		Metadata struct {
			EventType    string `json:"event_type"`
			EventPayload struct {
				DeliveryID string `json:"delivery_id"`
			} `json:"event_payload"`
		} `json:"metadata"`
	} `json:"messages"`
	ResponseMetadata struct {
		NextCursor string `json:"next_cursor"`
	} `json:"response_metadata"`
}

// findMarked looks among the messages of m's thread (or, outside a
// thread, its chat) posted since since for one marked with key, and
// returns its ts ("" when there is none).
func (a *Adapter) findMarked(ctx context.Context, m channels.Message, key string, since time.Time) (string, error) {
	method := "conversations.history"
	form := url.Values{"token": {a.cfg.BotToken.Reveal()}, "channel": {m.Chat}, "include_all_metadata": {"true"},
		"limit": {strconv.Itoa(lookupLimit)}, "oldest": {strconv.FormatInt(since.Unix(), 10) + ".000000"}, "inclusive": {"true"}}
	if thread := m.Meta[MetaThreadTS]; thread != "" {
		method = "conversations.replies"
		form.Set("ts", thread)
	}
	for range lookupPages {
		var ans threadAnswer
		if err := a.postForm(ctx, method, form, &ans); err != nil {
			a.countAPIError(err)
			return "", fmt.Errorf("%s: %w", method, err)
		}
		for _, msg := range ans.Messages {
			if msg.Metadata.EventType == MetadataEventType && msg.Metadata.EventPayload.DeliveryID == key {
				return msg.TS, nil
			}
		}
		if ans.ResponseMetadata.NextCursor == "" {
			break
		}
		form.Set("cursor", ans.ResponseMetadata.NextCursor)
	}
	return "", nil
}

// written looks for a message an earlier try under key may have made.
// A look that fails for a reason that may pass is an error (posting
// again could make a copy); one refused for good (a missing history
// scope) is logged and found nothing, so that the answer is posted.
func (a *Adapter) written(ctx context.Context, m channels.Message, key string, since time.Time) (string, error) {
	ts, err := a.findMarked(ctx, m, key, since)
	if err == nil {
		return ts, nil
	}
	if classify(err).retry || ctx.Err() != nil {
		return "", fmt.Errorf("look for an earlier try: %w", err)
	}
	a.log.Warn("cannot look for an earlier try of a post in its thread; posting it, which may make a copy", "err", err)
	return "", nil
}

// writeOnce runs write, which makes one message marked with key (a post,
// a stream's start), on the retry loop up to attempts tries. After a try
// that may have been written, the next try first looks for the message,
// and so does the end of the tries (past ctx's deadline, which may be
// what ended them): a message found is taken as written. unsure says an
// earlier call's try may have been written already.
func (a *Adapter) writeOnce(ctx context.Context, method string, attempts int, m channels.Message, key string, unsure bool,
	write func(context.Context) (string, error)) (string, error) {
	since := a.opts.Now().Add(-time.Minute) // Slack's clock may be behind ours
	if unsure {
		since = a.opts.Now().Add(-lookupWindow)
	}
	var ts string
	err := a.call(ctx, method, attempts, func(ctx context.Context) error {
		if unsure {
			found, err := a.written(ctx, m, key, since)
			if err != nil || found != "" {
				ts = found
				return err
			}
		}
		var err error
		ts, err = write(ctx)
		unsure = unsure || maybeWritten(err)
		return err
	})
	if err != nil && unsure {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), liveCallTimeout)
		defer cancel()
		if found, ferr := a.findMarked(lctx, m, key, since); ferr == nil && found != "" {
			return found, nil
		}
	}
	return ts, err
}
