package sessions

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ConversationInfo is what an operator sees of one stored conversation
// without reading its history.
type ConversationInfo struct {
	Key      string // channel:workspace:chat:thread
	Messages int64  // length of the history
	Queued   int64  // messages waiting in its inbox
	Locked   bool   // a replica holds it (a turn is running)
	// LastActive is when a turn last refreshed the history's TTL (zero
	// when the conversation has only queued messages).
	LastActive time.Time
}

// Inventory is every conversation the store holds, for the admin console:
// the most recently active first, and totals over all of them.
type Inventory struct {
	// Conversations are the most recently active ones, at most the limit
	// asked for.
	Conversations []ConversationInfo
	Total         int   // conversations found
	Queued        int64 // messages waiting, over all conversations
	QueuedConvs   int   // conversations with messages waiting
	Orphaned      int   // of those, held by no replica
	// Truncated: the scan stopped at MaxInventoryKeys keys; the totals
	// count what it saw.
	Truncated bool
}

// MaxInventoryKeys bounds the keys one inventory scans, so that a page
// view costs the same on a store with millions of conversations.
const MaxInventoryKeys = 20000

// Inventory scans the histories and inboxes (every master of a Cluster)
// and returns the limit most recently active conversations and the totals.
func (s *RedisStore) Inventory(ctx context.Context, limit int) (Inventory, error) {
	var inv Inventory
	keys, truncated, err := s.scanKeys(ctx, s.opts.Prefix+"conv:{*}:*", MaxInventoryKeys)
	if err != nil {
		return inv, err
	}
	inv.Truncated = truncated
	seen := map[string]bool{}
	var convs []string
	for _, key := range keys {
		rest, ok := strings.CutPrefix(key, s.opts.Prefix+"conv:{")
		if !ok {
			continue
		}
		i := strings.LastIndex(rest, "}:")
		if i < 0 {
			continue
		}
		conv, kind := rest[:i], rest[i+2:]
		if (kind != "history" && kind != "inbox") || seen[conv] {
			continue
		}
		seen[conv] = true
		convs = append(convs, conv)
	}
	infos := make([]ConversationInfo, 0, len(convs))
	// Keys of one conversation share a slot; a pipeline per batch keeps
	// the round trips few (go-redis splits it by node on a Cluster).
	const batch = 200
	for start := 0; start < len(convs); start += batch {
		part := convs[start:min(start+batch, len(convs))]
		pipe := s.client.Pipeline()
		type reads struct {
			history, inbox *redis.IntCmd
			locked         *redis.IntCmd
			ttl            *redis.DurationCmd
		}
		rs := make([]reads, len(part))
		for i, conv := range part {
			rs[i] = reads{
				history: pipe.LLen(ctx, s.key(conv, "history")),
				inbox:   pipe.LLen(ctx, s.key(conv, "inbox")),
				locked:  pipe.Exists(ctx, s.key(conv, "lock")),
				ttl:     pipe.PTTL(ctx, s.key(conv, "history")),
			}
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return inv, fmt.Errorf("sessions: inspect conversations: %w", err)
		}
		now := time.Now()
		for i, conv := range part {
			c := ConversationInfo{Key: conv, Messages: rs[i].history.Val(), Queued: rs[i].inbox.Val(), Locked: rs[i].locked.Val() > 0}
			if ttl := rs[i].ttl.Val(); c.Messages > 0 && ttl > 0 {
				// Every turn sets the TTL back to HistoryTTL.
				c.LastActive = now.Add(ttl - s.opts.HistoryTTL).Truncate(time.Second)
			}
			if c.Messages == 0 && c.Queued == 0 {
				continue // gone between the scan and the read
			}
			if c.Queued > 0 {
				inv.Queued += c.Queued
				inv.QueuedConvs++
				if !c.Locked {
					inv.Orphaned++
				}
			}
			infos = append(infos, c)
		}
	}
	inv.Total = len(infos)
	slices.SortFunc(infos, func(a, b ConversationInfo) int {
		return cmp.Or(b.LastActive.Compare(a.LastActive), cmp.Compare(a.Key, b.Key))
	})
	if limit > 0 && len(infos) > limit {
		infos = infos[:limit]
	}
	inv.Conversations = infos
	return inv, nil
}

// HistoryLen is the number of messages of conv's history.
func (s *RedisStore) HistoryLen(ctx context.Context, conv string) (int64, error) {
	n, err := s.client.LLen(ctx, s.key(conv, "history")).Result()
	if err != nil {
		return 0, fmt.Errorf("sessions: history length: %w", err)
	}
	return n, nil
}

// scanKeys lists the keys matching pattern on every master of a Cluster
// (or the one server), at most max of them (0: all); truncated reports
// that more were left.
func (s *RedisStore) scanKeys(ctx context.Context, pattern string, max int) (keys []string, truncated bool, err error) {
	var mu sync.Mutex
	scan := func(ctx context.Context, c redis.UniversalClient) error {
		iter := c.Scan(ctx, 0, pattern, 500).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			if max > 0 && len(keys) >= max {
				truncated = true
				mu.Unlock()
				return nil
			}
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	if c, ok := s.client.(*redis.ClusterClient); ok {
		err = c.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.client)
	}
	if err != nil {
		return nil, false, fmt.Errorf("sessions: scan keys: %w", err)
	}
	return keys, truncated, nil
}
