package slack

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ThreadStore remembers the threads the bot takes part in, so that a
// follow-up in such a thread continues the conversation without a new
// mention. It is shared by all replicas: whichever one receives the
// follow-up must know the thread.
type ThreadStore interface {
	// Remember marks the thread key (team:channel:thread_ts) as followed
	// and refreshes its expiry.
	Remember(ctx context.Context, key string) error
	// Followed reports whether key was remembered and has not expired.
	Followed(ctx context.Context, key string) (bool, error)
}

// NewRedisThreads keeps followed threads in Redis under prefix, each for
// ttl after the last message the bot took from it (use the history TTL: a
// thread whose history has expired is a stranger again).
func NewRedisThreads(client redis.UniversalClient, prefix string, ttl time.Duration) ThreadStore {
	if ttl <= 0 {
		ttl = 7 * 24 * time.Hour
	}
	return &redisThreads{client: client, prefix: prefix, ttl: ttl}
}

type redisThreads struct {
	client redis.UniversalClient
	prefix string
	ttl    time.Duration
}

func (r *redisThreads) key(k string) string { return r.prefix + "slack:thread:" + k }

func (r *redisThreads) Remember(ctx context.Context, key string) error {
	if err := r.client.Set(ctx, r.key(key), 1, r.ttl).Err(); err != nil {
		return fmt.Errorf("slack: remember thread: %w", err)
	}
	return nil
}

func (r *redisThreads) Followed(ctx context.Context, key string) (bool, error) {
	n, err := r.client.Exists(ctx, r.key(key)).Result()
	if err != nil {
		return false, fmt.Errorf("slack: look up thread: %w", err)
	}
	return n > 0, nil
}
