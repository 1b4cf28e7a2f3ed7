package sessions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A live reply (an answer shown while it is written) is recorded with its
// turn, so that a replica that dies mid-answer does not leave half an
// answer standing: the next holder of the conversation reads the record
// with its claim (Claim.LiveReply) and finishes that reply instead of
// posting another. The record is the conversation's "live" part, under
// its hash tag: the claimed item's digest and the channel's reference
// (what its adapter needs to find the messages again). Complete deletes
// it with the turn; otherwise it expires after LiveReplyTTL.

// liveReplyPart is the conversation's part that records its live reply.
const liveReplyPart = "live"

// LiveReplyTTL bounds how long a live reply that nobody finished stays
// recorded: a message left that long is answered anew, beside it.
const LiveReplyTTL = 24 * time.Hour

// MaxLiveReplyBytes bounds a recorded reference, so that a sink that
// misbehaves cannot grow a conversation's keys.
const MaxLiveReplyBytes = 4 << 10

// recordLiveScript records a live reply while the caller holds the lock:
// a holder whose lock expired must not overwrite the record of whoever
// took the conversation over.
//
// KEYS: live, lock. ARGV: token, record, TTL ms. Returns 1, or 0 (lock
// not held).
var recordLiveScript = redis.NewScript(`
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`)

// RecordLiveReply records ref, the reference of the live reply to item
// that the lock's holder now shows, for its conversation's next holder
// should this one stop before Complete. One round trip. It fails with
// ErrLockLost, recording nothing, when the lock is no longer the
// holder's.
func (s *RedisStore) RecordLiveReply(ctx context.Context, lock *Lock, item []byte, ref string) error {
	if ref == "" || len(ref) > MaxLiveReplyBytes {
		return fmt.Errorf("sessions: record live reply: a reference of %d bytes (1 to %d)", len(ref), MaxLiveReplyBytes)
	}
	n, err := recordLiveScript.Run(ctx, s.client, []string{s.key(lock.conv, liveReplyPart), s.key(lock.conv, "lock")},
		lock.token, itemDigest(item)+" "+ref, LiveReplyTTL.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("sessions: record live reply: %w", err)
	}
	if n == 0 {
		lock.markLost()
		return ErrLockLost
	}
	return nil
}

// liveReplyOf is the reference in record when it was made for item, else
// "": a record left by an attempt at another message (one a paused turn
// left, say) is not this message's answer.
func liveReplyOf(record string, item []byte) string {
	digest, ref, ok := strings.Cut(record, " ")
	if !ok || digest != itemDigest(item) {
		return ""
	}
	return ref
}

// itemDigest names a queued item by its content.
func itemDigest(item []byte) string {
	sum := sha256.Sum256(item)
	return hex.EncodeToString(sum[:16])
}

// MayBeAnothers reports whether another holder may have the conversation
// by now: a renewal found the lock gone, or a whole TTL has passed since
// this holder last knew it its own. Unlike Held, a lock released or
// detached by its holder is not another's for that.
func (l *Lock) MayBeAnothers() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost || time.Since(l.renewed) >= l.store.opts.LockTTL
}

// markLost records that a write found the lock another's.
func (l *Lock) markLost() {
	l.mu.Lock()
	l.lost = true
	l.mu.Unlock()
}
