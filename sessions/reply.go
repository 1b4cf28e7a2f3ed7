package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReplyTTL is how long a reply posted for a waiting process is kept: a
// process that died before taking it leaves nothing behind for longer.
const ReplyTTL = time.Hour

func (s *RedisStore) replyKey(id string) string { return s.opts.Prefix + "reply:" + id }

// PostReply leaves body for the process that waits for the answer to
// message id (see TakeReply). Replies to one id are kept in order.
func (s *RedisStore) PostReply(ctx context.Context, id string, body []byte) error {
	key := s.replyKey(id)
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.RPush(ctx, key, body)
		p.Expire(ctx, key, ReplyTTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("sessions: post reply: %w", err)
	}
	return nil
}

// TakeReply removes and returns the oldest reply posted for message id;
// ok is false when none is there yet. It does not block, so that the
// waiter stays free to notice its own cancellation.
func (s *RedisStore) TakeReply(ctx context.Context, id string) (body []byte, ok bool, err error) {
	return s.take(ctx, s.replyKey(id), "take reply")
}

// take pops the oldest entry of the list at key; ok is false when it is
// empty. what names the step in an error.
func (s *RedisStore) take(ctx context.Context, key, what string) ([]byte, bool, error) {
	b, err := s.client.LPop(ctx, key).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("sessions: %s: %w", what, err)
	}
	return b, true, nil
}
