package feishu

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// stateStore remembers what the channel itself must know across replicas:
// the threads the bot answered (followed without a new mention).
type stateStore interface {
	// markThread remembers thread key k for ttl.
	markThread(ctx context.Context, k string, ttl time.Duration) error
	// followed reports whether k was marked and has not expired.
	followed(ctx context.Context, k string) (bool, error)
}

type redisState struct {
	client redis.UniversalClient
	prefix string
}

func (r *redisState) markThread(ctx context.Context, k string, ttl time.Duration) error {
	return r.client.Set(ctx, r.prefix+"feishu:thread:"+k, 1, ttl).Err()
}

func (r *redisState) followed(ctx context.Context, k string) (bool, error) {
	n, err := r.client.Exists(ctx, r.prefix+"feishu:thread:"+k).Result()
	return n > 0, err
}

// memState is the single-process fallback.
type memState struct {
	mu   sync.Mutex
	keys map[string]time.Time
}

func newMemState() *memState { return &memState{keys: map[string]time.Time{}} }

func (s *memState) sweep(now time.Time) {
	for k, exp := range s.keys {
		if now.After(exp) {
			delete(s.keys, k)
		}
	}
}

func (s *memState) markThread(_ context.Context, k string, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.sweep(now)
	s.keys["thread:"+k] = now.Add(ttl)
	return nil
}

func (s *memState) followed(_ context.Context, k string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.keys["thread:"+k]
	return ok && time.Now().Before(exp), nil
}
