package sessions_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/sessions"
)

// TestALiveReplyIsRecordedForTheNextHolder: a live reply recorded by the
// holder is read by the next claim of the same message, under the
// conversation's hash tag and with a bounded TTL, and forgotten when the
// turn completes.
func TestALiveReplyIsRecordedForTheNextHolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{LockTTL: 10 * time.Second})
	conv := "slack:T1:C1:1.1"
	accept(t, s, conv, sessions.Arrival{Item: []byte("question")})
	c := claim(t, s, conv)
	if c.LiveReply != "" {
		t.Fatalf("LiveReply = %q before anything was recorded", c.LiveReply)
	}
	if err := s.RecordLiveReply(ctx, c.Lock, c.Item, `{"ts":"1.2"}`); err != nil {
		t.Fatal(err)
	}
	key := r.Prefix + "conv:{" + conv + "}:live"
	if ttl := r.Client.PTTL(ctx, key).Val(); ttl <= 0 || ttl > sessions.LiveReplyTTL {
		t.Fatalf("record TTL = %v; want at most %v", ttl, sessions.LiveReplyTTL)
	}
	// The holder dies: its lock goes, the message stays queued.
	c.Lock.Detach()
	if err := r.Client.Del(ctx, s.Key(conv, "lock")).Err(); err != nil {
		t.Fatal(err)
	}
	next := claim(t, s, conv)
	if next.LiveReply != `{"ts":"1.2"}` {
		t.Fatalf("the next holder reads LiveReply %q; want the recorded reference", next.LiveReply)
	}
	if _, err := s.Complete(ctx, next.Lock, next.Item, nil); err != nil {
		t.Fatal(err)
	}
	if n := r.Client.Exists(ctx, key).Val(); n != 0 {
		t.Fatal("the record outlived the completed turn")
	}
}

// TestALiveReplyRecordIsTheHoldersAndItsMessages: a holder whose lock is
// gone records nothing (it must not overwrite its successor's record);
// a record made for another message is not this one's; an empty or
// oversized reference is refused.
func TestALiveReplyRecordIsTheHoldersAndItsMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{LockTTL: 10 * time.Second})
	conv := "feishu:t:oc:om"
	accept(t, s, conv, sessions.Arrival{Item: []byte("first")})
	accept(t, s, conv, sessions.Arrival{Item: []byte("second")})
	c := claim(t, s, conv)
	for _, ref := range []string{"", strings.Repeat("x", sessions.MaxLiveReplyBytes+1)} {
		if err := s.RecordLiveReply(ctx, c.Lock, c.Item, ref); err == nil {
			t.Errorf("a reference of %d bytes was recorded", len(ref))
		}
	}
	// Recorded for "second" while "first" is at the head: not first's.
	if err := s.RecordLiveReply(ctx, c.Lock, []byte("second"), "other"); err != nil {
		t.Fatal(err)
	}
	c.Lock.Detach()
	if err := r.Client.Set(ctx, s.Key(conv, "lock"), "someone-else", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordLiveReply(ctx, c.Lock, c.Item, "stale"); !errors.Is(err, sessions.ErrLockLost) {
		t.Fatalf("a record without the lock = %v; want ErrLockLost", err)
	}
	if err := r.Client.Del(ctx, s.Key(conv, "lock")).Err(); err != nil {
		t.Fatal(err)
	}
	if next := claim(t, s, conv); next.LiveReply != "" {
		t.Fatalf("LiveReply = %q; want nothing: the record was another message's", next.LiveReply)
	}
}

// TestALockMayBeAnothersOnceItsTTLPassesUnrenewed: a held lock is not
// another's, nor one its holder released; one whose renewals stopped
// reaching Redis for a TTL may be.
func TestALockMayBeAnothersOnceItsTTLPassesUnrenewed(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sure, _ := newStore(t, sessions.Options{LockTTL: time.Minute})
	held := lock(t, sure, "console:::held")
	released := lock(t, sure, "console:::released")
	if err := released.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if held.MayBeAnothers() || released.MayBeAnothers() {
		t.Fatal("a held lock, or one released a moment ago, may be another's")
	}
	s, _ := newStore(t, sessions.Options{LockTTL: 300 * time.Millisecond})
	l, err := s.TryLock(ctx, "console:::ttl")
	if err != nil {
		t.Fatal(err)
	}
	cancel() // the renewals stop, as when the holder loses Redis
	deadline := time.Now().Add(10 * time.Second)
	for !l.MayBeAnothers() {
		if time.Now().After(deadline) {
			t.Fatal("a lock unrenewed for a TTL is still sure")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
