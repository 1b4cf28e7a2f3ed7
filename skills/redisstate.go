package skills

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisState keeps the disabled list and trusted fingerprints in Redis so
// that every replica agrees on them: a set of disabled names and a hash of
// SKILL.md path → SHA-256.
//
// While Watch runs, reads are served from a snapshot of both held in
// memory, so that a turn reads the skill state without a Redis round
// trip: the snapshot is replaced after each change made here, when another
// replica (or the CLI) announces a change, and every refresh interval in
// case an announcement was missed. Without Watch every read asks Redis.
type RedisState struct {
	client redis.UniversalClient
	prefix string
	snap   atomic.Pointer[stateSnapshot] // nil unless Watch runs
}

// stateSnapshot is the whole skill state at one moment. Its maps are never
// modified once published.
type stateSnapshot struct {
	disabled map[string]bool
	trusted  map[string]string
}

// NewRedisState returns a State under prefix (e.g. "parley:").
func NewRedisState(client redis.UniversalClient, prefix string) *RedisState {
	return &RedisState{client: client, prefix: prefix}
}

func (r *RedisState) disabledKey() string { return r.prefix + "skills:disabled" }
func (r *RedisState) usesKey() string     { return r.prefix + "skills:uses" }

// Usage counts skill loads: advice for the operator's skills.index pins,
// which `parley skills list` shows. The index never reads it, so that it
// stays the same in every process. RedisState implements it; without
// Redis nothing is counted.
type Usage interface {
	// CountUse records one load of the skill.
	CountUse(ctx context.Context, name string) error
	// Uses returns the loads counted per skill.
	Uses(ctx context.Context) (map[string]int64, error)
}

var _ Usage = (*RedisState)(nil)

// CountUse implements Usage.
func (r *RedisState) CountUse(ctx context.Context, name string) error {
	if !ValidName(name) {
		return fmt.Errorf("skill name %q: %w", name, ErrInvalidName)
	}
	if err := r.client.HIncrBy(ctx, r.usesKey(), name, 1).Err(); err != nil {
		return fmt.Errorf("skills: count a load: %w", err)
	}
	return nil
}

// Uses implements Usage.
func (r *RedisState) Uses(ctx context.Context) (map[string]int64, error) {
	raw, err := r.client.HGetAll(ctx, r.usesKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("skills: read load counts: %w", err)
	}
	out := make(map[string]int64, len(raw))
	for name, v := range raw {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[name] = n
		}
	}
	return out, nil
}
func (r *RedisState) trustedKey() string { return r.prefix + "skills:trusted" }

// StateChannel is the pub/sub channel on which a change of the skill state
// is announced.
func StateChannel(prefix string) string { return prefix + "skills:state" }

// Disabled implements State. The map must not be modified.
func (r *RedisState) Disabled(ctx context.Context) (map[string]bool, error) {
	if s := r.snap.Load(); s != nil {
		return s.disabled, nil
	}
	names, err := r.client.SMembers(ctx, r.disabledKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("skills: read disabled list: %w", err)
	}
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out, nil
}

// SetDisabled implements State.
func (r *RedisState) SetDisabled(ctx context.Context, name string, off bool) error {
	var err error
	if off {
		err = r.client.SAdd(ctx, r.disabledKey(), name).Err()
	} else {
		err = r.client.SRem(ctx, r.disabledKey(), name).Err()
	}
	if err != nil {
		return fmt.Errorf("skills: update disabled list: %w", err)
	}
	r.changed(ctx)
	return nil
}

// Trusted implements State.
func (r *RedisState) Trusted(ctx context.Context, path, sha string) (bool, error) {
	if s := r.snap.Load(); s != nil {
		got, ok := s.trusted[path]
		return ok && got == sha, nil
	}
	got, err := r.client.HGet(ctx, r.trustedKey(), path).Result()
	if err == redis.Nil {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("skills: read trust: %w", err)
	}
	return got == sha, nil
}

// Trust implements State.
func (r *RedisState) Trust(ctx context.Context, path, sha string) error {
	if err := r.client.HSet(ctx, r.trustedKey(), path, sha).Err(); err != nil {
		return fmt.Errorf("skills: record trust: %w", err)
	}
	r.changed(ctx)
	return nil
}

// changed refreshes this replica's snapshot and tells the others. The
// change itself is stored; a failure here only delays when the other
// replicas see it (until their next refresh).
func (r *RedisState) changed(ctx context.Context) {
	if r.snap.Load() != nil {
		_ = r.refresh(ctx)
	}
	_ = r.client.Publish(ctx, StateChannel(r.prefix), "changed").Err()
}

// refresh reads the whole state in one round trip and publishes it as the
// snapshot.
func (r *RedisState) refresh(ctx context.Context) error {
	pipe := r.client.Pipeline()
	names := pipe.SMembers(ctx, r.disabledKey())
	trusted := pipe.HGetAll(ctx, r.trustedKey())
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("skills: read skill state: %w", err)
	}
	s := &stateSnapshot{disabled: make(map[string]bool, len(names.Val())), trusted: trusted.Val()}
	for _, n := range names.Val() {
		s.disabled[n] = true
	}
	r.snap.Store(s)
	return nil
}

// Watch serves reads from a snapshot until ctx ends (see RedisState): it
// reads the state, follows the announcements of changes and reads it again
// every refresh interval. ready is closed once the first snapshot is in
// place (or Watch failed to start). Reads go to Redis again after Watch
// returns.
func (r *RedisState) Watch(ctx context.Context, every time.Duration, log *slog.Logger, ready chan<- struct{}) error {
	defer r.snap.Store(nil)
	err := follow(ctx, r.client, StateChannel(r.prefix), every, ready, r.refresh, func(ctx context.Context) {
		if err := r.refresh(ctx); err != nil && ctx.Err() == nil {
			log.Warn("skills: cannot refresh the skill state; keeping the last one read", "err", err)
		}
	})
	if err != nil {
		return fmt.Errorf("skills: watch the skill state: %w", err)
	}
	return nil
}

// follow subscribes to channel, runs start once subscribed, closes ready
// (also when either failed), then runs each after every message on the
// channel, and every interval when every > 0, until ctx ends.
func follow(ctx context.Context, client redis.UniversalClient, channel string, every time.Duration, ready chan<- struct{},
	start func(context.Context) error, each func(context.Context)) error {
	sub := client.Subscribe(ctx, channel)
	defer sub.Close()
	_, err := sub.Receive(ctx)
	if err == nil && start != nil {
		err = start(ctx)
	}
	if ready != nil {
		close(ready)
	}
	if err != nil {
		return err
	}
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	messages := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-messages:
			if !ok {
				return nil
			}
		case <-tick:
		}
		each(ctx)
	}
}

// ReloadChannel is the pub/sub channel on which a reload is announced.
func ReloadChannel(prefix string) string { return prefix + "skills:reload" }

// AnnounceReload tells every replica to reload its skills.
func AnnounceReload(ctx context.Context, client redis.UniversalClient, prefix string) error {
	if err := client.Publish(ctx, ReloadChannel(prefix), "reload").Err(); err != nil {
		return fmt.Errorf("skills: announce reload: %w", err)
	}
	return nil
}

// WatchReloads reloads reg whenever a reload is announced, until ctx ends.
// ready is closed once the subscription is active, so a caller (or a test)
// knows announcements from then on are seen. onReload, if set, is called
// after each reload with its result.
func WatchReloads(ctx context.Context, client redis.UniversalClient, prefix string, reg *Registry, log *slog.Logger, ready chan<- struct{}, onReload func(*Catalog, error)) error {
	err := follow(ctx, client, ReloadChannel(prefix), 0, ready, nil, func(context.Context) {
		c, err := reg.Reload()
		if err != nil {
			log.Error("skills: reload announced by another replica failed; keeping the previous skills", "err", err)
		} else {
			log.Info("skills: reloaded on announcement", "skills", c.Len())
		}
		if onReload != nil {
			onReload(c, err)
		}
	})
	if err != nil {
		return fmt.Errorf("skills: subscribe to reloads: %w", err)
	}
	return nil
}
