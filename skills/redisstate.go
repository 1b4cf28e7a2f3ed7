package skills

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// RedisState keeps the disabled list and trusted fingerprints in Redis so
// that every replica agrees on them: a set of disabled names and a hash of
// SKILL.md path → SHA-256.
type RedisState struct {
	client redis.UniversalClient
	prefix string
}

// NewRedisState returns a State under prefix (e.g. "parley:").
func NewRedisState(client redis.UniversalClient, prefix string) *RedisState {
	return &RedisState{client: client, prefix: prefix}
}

func (r *RedisState) disabledKey() string { return r.prefix + "skills:disabled" }
func (r *RedisState) trustedKey() string  { return r.prefix + "skills:trusted" }

// Disabled implements State.
func (r *RedisState) Disabled(ctx context.Context) (map[string]bool, error) {
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
	return nil
}

// Trusted implements State.
func (r *RedisState) Trusted(ctx context.Context, path, sha string) (bool, error) {
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
	return nil
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
	sub := client.Subscribe(ctx, ReloadChannel(prefix))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		if ready != nil {
			close(ready)
		}
		return fmt.Errorf("skills: subscribe to reloads: %w", err)
	}
	if ready != nil {
		close(ready)
	}
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-ch:
			if !ok {
				return nil
			}
			c, err := reg.Reload()
			if err != nil {
				log.Error("skills: reload announced by another replica failed; keeping the previous skills", "err", err)
			} else {
				log.Info("skills: reloaded on announcement", "skills", c.Len())
			}
			if onReload != nil {
				onReload(c, err)
			}
		}
	}
}
