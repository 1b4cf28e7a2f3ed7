package sessions

import (
	"context"
	"fmt"
	"strings"
)

// Orphans implements Store. It scans every master of a Cluster.
func (s *RedisStore) Orphans(ctx context.Context) ([]string, error) {
	inboxes, _, err := s.scanKeys(ctx, s.opts.Prefix+"conv:{*}:inbox", 0)
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
