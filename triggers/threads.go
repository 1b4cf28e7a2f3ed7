package triggers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Lifetimes of a group's thread in Redis: while the group is open the
// thread is kept for OpenThreadTTL from its last work (an alert that fires
// for weeks keeps its thread); once resolved, for ResolvedThreadTTL, so
// that an alert firing again soon after continues the same thread.
const (
	OpenThreadTTL     = 30 * 24 * time.Hour
	ResolvedThreadTTL = 7 * 24 * time.Hour
)

// Thread is a group's thread: the platform's id of its root post, and the
// work that posted it (so that the same work, tried again after a crash,
// knows its root is already posted and does not post its text twice).
//
// Resolved is the group's state the root post shows (resolved or not), so
// that the root is edited once when it changes, not on every work.
type Thread struct {
	Root     string `json:"root"`
	Creator  string `json:"creator"`
	Resolved bool   `json:"resolved,omitempty"`
}

// Threads is the group → thread map, in Redis, shared by every replica.
// The gateway reads and writes it under the destination chat's
// conversation lock, so one group never gets two threads.
type Threads struct {
	client redis.UniversalClient
	prefix string
}

// NewThreads returns the map under prefix (the sessions' key prefix).
func NewThreads(client redis.UniversalClient, prefix string) *Threads {
	return &Threads{client: client, prefix: prefix}
}

// key is the Redis key of group's thread in d's chat.
func (t *Threads) key(d Destination, group string) string {
	// Each app of a platform has threads of its own (an app can reply
	// only in its own thread's conversation).
	platform := d.Platform
	if d.Account != "" && d.Account != "default" {
		platform += "/" + d.Account
	}
	chat := strings.Join([]string{platform, d.Workspace, d.Chat}, ":")
	return t.prefix + "trigger-thread:{" + chat + "}:" + group
}

// Get returns group's thread in d's chat; ok is false when it has none.
func (t *Threads) Get(ctx context.Context, d Destination, group string) (th Thread, ok bool, err error) {
	raw, err := t.client.Get(ctx, t.key(d, group)).Bytes()
	if errors.Is(err, redis.Nil) {
		return Thread{}, false, nil
	}
	if err != nil {
		return Thread{}, false, fmt.Errorf("triggers: read a group's thread: %w", err)
	}
	if err := json.Unmarshal(raw, &th); err != nil || th.Root == "" {
		return Thread{}, false, nil // unreadable: the next work starts a new thread
	}
	return th, true, nil
}

// Set records group's thread in d's chat for ttl.
func (t *Threads) Set(ctx context.Context, d Destination, group string, th Thread, ttl time.Duration) error {
	raw, err := json.Marshal(th)
	if err != nil {
		return fmt.Errorf("triggers: encode a group's thread: %w", err)
	}
	if err := t.client.Set(ctx, t.key(d, group), raw, ttl).Err(); err != nil {
		return fmt.Errorf("triggers: record a group's thread: %w", err)
	}
	return nil
}
