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
	b, err := s.client.LPop(ctx, s.replyKey(id)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("sessions: take reply: %w", err)
	}
	return b, true, nil
}
