package sessions

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Orphans implements Store. It scans every master of a Cluster.
func (s *RedisStore) Orphans(ctx context.Context) ([]string, error) {
	pattern := s.opts.Prefix + "conv:{*}:inbox"
	var inboxes []string
	var mu sync.Mutex
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 500).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			inboxes = append(inboxes, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		iter := s.client.Scan(ctx, 0, pattern, 500).Iterator()
		for iter.Next(ctx) {
			inboxes = append(inboxes, iter.Val())
		}
		err = iter.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("sessions: scan queues: %w", err)
	}
	var orphans []string
	for _, key := range inboxes {
		conv := strings.TrimSuffix(strings.TrimPrefix(key, s.opts.Prefix+"conv:{"), "}:inbox")
		// Two keys of one slot: EXISTS on the lock, LLEN on the inbox.
		pipe := s.client.Pipeline()
		locked := pipe.Exists(ctx, s.key(conv, "lock"))
		depth := pipe.LLen(ctx, key)
		if _, err := pipe.Exec(ctx); err != nil {
			return orphans, fmt.Errorf("sessions: inspect queue: %w", err)
		}
		if locked.Val() == 0 && depth.Val() > 0 {
			orphans = append(orphans, conv)
		}
	}
	return orphans, nil
}
