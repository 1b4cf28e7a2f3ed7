package feishu

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// stateStore remembers what the channel itself must know across replicas:
// the threads the bot answered (followed without a new mention) and the
// messages that already got a note, so a re-push never sends it twice.
type stateStore interface {
	// markThread remembers thread key k for ttl.
	markThread(ctx context.Context, k string, ttl time.Duration) error
	// followed reports whether k was marked and has not expired.
	followed(ctx context.Context, k string) (bool, error)
	// once reports whether this is the first claim of k (SET NX).
	once(ctx context.Context, k string, ttl time.Duration) (bool, error)
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

func (r *redisState) once(ctx context.Context, k string, ttl time.Duration) (bool, error) {
	return r.client.SetNX(ctx, r.prefix+"feishu:once:"+k, 1, ttl).Result()
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

func (s *memState) once(_ context.Context, k string, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if exp, ok := s.keys["once:"+k]; ok && now.Before(exp) {
		return false, nil
	}
	s.sweep(now)
	s.keys["once:"+k] = now.Add(ttl)
	return true, nil
}
