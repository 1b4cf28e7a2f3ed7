package channels

import (
	"context"
	"errors"
	"time"
)

// Poster is implemented by adapters whose replies can be delivered one
// post at a time, each with the id the platform gave it. The gateway then
// owns the delivery: it paces the posts of a chat across every replica,
// and a reply that failed half way is retried from the first part not yet
// posted, never from the start, so no part is posted twice.
type Poster interface {
	// Parts cuts r into the posts Send would make, in order, already in
	// the platform's format and within its size limit.
	Parts(m Message, r Reply) []string
	// Post makes one attempt at posting part into the conversation m came
	// from and returns the platform's id of the message it made ("" when
	// the platform gives none). A failure is a *PostError saying whether
	// another attempt may succeed; Post does not retry by itself.
	Post(ctx context.Context, m Message, part string) (id string, err error)
	// Pace is how fast one chat of the platform may be posted to.
	Pace() Pace
}

// KeyedPoster is implemented by a Poster that can mark a post with a key
// and find it again: a platform that posted a message and then failed to
// answer (a timeout, a 5xx after the write) leaves it once, since the
// next try finds it instead of posting a copy.
type KeyedPoster interface {
	// PostKeyed is Post of part marked with key, the part's delivery id
	// (the same on every try, on every replica). again says an earlier try
	// with key may have reached the platform: the post is looked for first,
	// and the id of the message found is returned instead of posting.
	PostKeyed(ctx context.Context, m Message, part, key string, again bool) (id string, err error)
}

// PosterFor is implemented by a Poster that serves several transports of
// which only some post part by part. WeChat is one: an iLink answer is a
// series of messages, but a WeCom AI-bot answer finishes the stream its
// question opened, which only Send can do. The gateway sends the messages
// PostsFor refuses as it would for a channel that is no Poster.
type PosterFor interface {
	PostsFor(m Message) bool
}

// Pace is a platform's posting rate for one chat: one post every Every,
// after a quiet spell up to Burst at once. The zero value is unpaced.
type Pace struct {
	Every time.Duration
	Burst int // below 1 counts as 1
}

// PostError is a failed Post, classified for the delivery loop.
type PostError struct {
	// Retry is true when sending the same post again may succeed: a rate
	// limit, a 5xx, a dropped connection — not a refused token or a
	// deleted chat.
	Retry bool
	// After is the wait the platform asked for (Retry-After), or 0.
	After time.Duration
	Err   error
}

func (e *PostError) Error() string { return e.Err.Error() }
func (e *PostError) Unwrap() error { return e.Err }

// Retryable reports whether a failed Post may succeed when tried again,
// and the wait the platform asked for. An error that is not a *PostError
// (a cancelled context, an adapter's own bug) is not retryable.
func Retryable(err error) (bool, time.Duration) {
	var pe *PostError
	if errors.As(err, &pe) {
		return pe.Retry, pe.After
	}
	return false, 0
}
