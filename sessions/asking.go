package sessions

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// A turn that waits for a person's answer (a tool's server asked them
// something) records who it waits for under the conversation's hash tag,
// for as long as it waits. Accept hands that person's next arrival in the
// conversation to the answers list instead of the inbox, whichever replica
// it reaches; the waiting turn takes it from there. The turn keeps the
// conversation's lock while it waits, so everyone else's messages queue as
// they do behind any turn.

// Asker is the part of a store that lets a turn wait for an answer.
type Asker interface {
	// Ask records that conv's turn waits for sender's answer, for ttl.
	Ask(ctx context.Context, conv, sender string, ttl time.Duration) error
	// TakeAnswer removes and returns the oldest answer that arrived for
	// conv's question (the arrival's Item); ok is false when none has. It
	// does not block, so that the waiter stays free to notice its own
	// cancellation.
	TakeAnswer(ctx context.Context, conv string) (item []byte, ok bool, err error)
	// EndAsk ends the wait: later arrivals are queued again, and answers
	// nobody took are dropped.
	EndAsk(ctx context.Context, conv string) error
}

var _ Asker = (*RedisStore)(nil)

// Ask implements Asker. An answer left from an earlier question is
// dropped in the same step, so it cannot answer this one.
func (s *RedisStore) Ask(ctx context.Context, conv, sender string, ttl time.Duration) error {
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.key(conv, "answers"))
		p.Set(ctx, s.key(conv, "asking"), sender, ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("sessions: ask: %w", err)
	}
	return nil
}

// TakeAnswer implements Asker.
func (s *RedisStore) TakeAnswer(ctx context.Context, conv string) ([]byte, bool, error) {
	return s.take(ctx, s.key(conv, "answers"), "take an answer")
}

// EndAsk implements Asker.
func (s *RedisStore) EndAsk(ctx context.Context, conv string) error {
	if err := s.client.Del(ctx, s.key(conv, "asking"), s.key(conv, "answers")).Err(); err != nil {
		return fmt.Errorf("sessions: end a question: %w", err)
	}
	return nil
}
