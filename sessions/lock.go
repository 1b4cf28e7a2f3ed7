package sessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Lock is a conversation lock with an owner token. It renews itself every
// third of its TTL until Release or Complete, or until the context it was
// taken with ends (then it expires within one TTL, unless released first); if a
// renewal finds the lock gone, Lost reports it and the holder's next write
// fails with ErrLockLost.
type Lock struct {
	store *RedisStore
	conv  string
	token string

	stop     context.CancelFunc // ends the renewal
	done     chan struct{}      // closed when the renewal has returned
	mu       sync.Mutex
	lost     bool
	released bool
	// renewed is when the holder last knew the lock to be its own for a
	// whole TTL: when it sent the command that took or renewed it.
	renewed time.Time
	// room is the turn's room write, for its Complete (WriteWithTurn).
	room *RoomWrite
}

var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`)

var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// TryLock implements Store.
func (s *RedisStore) TryLock(ctx context.Context, conv string) (*Lock, error) {
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	ok, err := s.client.SetNX(ctx, s.key(conv, "lock"), token, s.opts.LockTTL).Result()
	if err != nil {
		return nil, fmt.Errorf("sessions: lock: %w", err)
	}
	if !ok {
		return nil, ErrLocked
	}
	return s.held(ctx, conv, token, sent), nil
}

// newToken is a lock owner's token: random, so that no other holder can
// release or write through a lock it does not own.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("sessions: lock token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// held starts renewing a lock taken with token by a command sent at sent.
func (s *RedisStore) held(ctx context.Context, conv, token string, sent time.Time) *Lock {
	rctx, stop := context.WithCancel(ctx)
	l := &Lock{store: s, conv: conv, token: token, stop: stop, done: make(chan struct{}), renewed: sent}
	go l.renew(rctx)
	return l
}

// Conversation is the key the lock holds.
func (l *Lock) Conversation() string { return l.conv }

// renew extends the lock every third of its TTL until ctx ends (Release,
// or the holder's context).
func (l *Lock) renew(ctx context.Context) {
	defer close(l.done)
	every := l.store.opts.LockTTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sent := time.Now()
			rctx, cancel := context.WithTimeout(ctx, every)
			n, err := renewScript.Run(rctx, l.store.client, []string{l.store.key(l.conv, "lock")}, l.token, l.store.opts.LockTTL.Milliseconds()).Int()
			cancel()
			if err == nil && n == 0 {
				l.mu.Lock()
				l.lost = true
				l.mu.Unlock()
				return
			}
			if err == nil {
				l.mu.Lock()
				l.renewed = sent
				l.mu.Unlock()
			}
			// A transient error is retried on the next tick; the TTL
			// leaves two more chances before the lock can expire.
		}
	}
}

// Token is the holder's token, the value the lock key holds while the
// lock is this holder's: a script of another package that must act only
// while the lock is held compares it (see Key).
func (l *Lock) Token() string { return l.token }

// Detach stops renewing the lock without releasing it: the holder has
// handed the conversation to something else in Redis (a paused turn
// waiting for an approval replaces the lock's value), so the lock is no
// longer this holder's to renew or delete.
func (l *Lock) Detach() { l.end() }

// Lost reports whether a renewal found the lock taken or expired.
func (l *Lock) Lost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Held reports whether the lock is certainly still this holder's: no
// renewal found it gone, and less than a TTL has passed since it was last
// taken or renewed. A holder that cannot reach Redis stops being sure of
// its lock one TTL after the last renewal that did.
func (l *Lock) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.lost && !l.released && time.Since(l.renewed) < l.store.opts.LockTTL
}

// Release stops renewal and deletes the lock if this holder still owns it.
// It is safe to call more than once, and after Complete.
func (l *Lock) Release(ctx context.Context) error {
	if !l.end() {
		return nil
	}
	if err := releaseScript.Run(ctx, l.store.client, []string{l.store.key(l.conv, "lock")}, l.token).Err(); err != nil {
		return fmt.Errorf("sessions: release lock: %w", err)
	}
	return nil
}

// end stops the renewal; it reports false when the lock had ended before.
func (l *Lock) end() bool {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return false
	}
	l.released = true
	l.mu.Unlock()
	l.stop()
	<-l.done
	return true
}
