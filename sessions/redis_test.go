package sessions_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/sessions"
)

func newStore(t *testing.T, opts sessions.Options) (*sessions.RedisStore, *redistest.Redis) {
	t.Helper()
	r := redistest.New(t)
	opts.Prefix = r.Prefix
	return sessions.NewRedis(r.Client, opts), r
}

func lock(t *testing.T, s sessions.Store, conv string) *sessions.Lock {
	t.Helper()
	l, err := s.TryLock(context.Background(), conv)
	if err != nil {
		t.Fatalf("TryLock(%q): %v", conv, err)
	}
	t.Cleanup(func() { l.Release(context.Background()) })
	return l
}

func user(text string) sessions.Message { return sessions.Message{Role: "user", Content: text} }

func TestCommitTurnAppendsAcksAndTrims(t *testing.T) {
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{MaxMessages: 4, HistoryTTL: time.Hour})
	conv := "slack:T1:C1:1700.1"
	for _, item := range []string{"m1", "m2"} {
		if _, err := s.Enqueue(ctx, conv, []byte(item), 10); err != nil {
			t.Fatal(err)
		}
	}
	l := lock(t, s, conv)
	turn := []sessions.Message{user("hi"), {Role: "assistant", Content: "hello", ToolCalls: []sessions.ToolCall{{ID: "c1", Name: "x", Arguments: "{}"}}}, {Role: "tool", ToolCallID: "c1", Content: "ok"}}
	trimmed, err := s.CommitTurn(ctx, l, turn, []byte("m1"))
	if err != nil || trimmed {
		t.Fatalf("CommitTurn = %v, %v; want no trim, nil", trimmed, err)
	}
	head, ok, _ := s.Head(ctx, conv)
	if !ok || string(head) != "m2" {
		t.Fatalf("inbox head = %q, %v; want m2 (m1 acknowledged with the turn)", head, ok)
	}
	got, err := s.History(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(turn) {
		t.Fatalf("history = %+v\nwant %+v", got, turn)
	}
	ttl := r.Client.PTTL(ctx, r.Prefix+"conv:{"+conv+"}:history").Val()
	if ttl <= 0 || ttl > time.Hour {
		t.Fatalf("history TTL = %v; want refreshed to ≤ 1h", ttl)
	}
	trimmed, err = s.CommitTurn(ctx, l, []sessions.Message{user("again"), {Role: "assistant", Content: "yes"}}, []byte("m2"))
	if err != nil || !trimmed {
		t.Fatalf("second CommitTurn = %v, %v; want trimmed", trimmed, err)
	}
	got, _ = s.History(ctx, conv)
	if len(got) != 4 || got[3].Content != "yes" || got[0].Role != "assistant" {
		t.Fatalf("trimmed history = %+v; want the newest 4", got)
	}
	if _, ok, _ := s.Head(ctx, conv); ok {
		t.Fatal("inbox not empty after both items were committed")
	}
}

func TestLockIsExclusiveAndOwned(t *testing.T) {
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{LockTTL: time.Second})
	conv := "console:::a"
	l := lock(t, s, conv)
	if _, err := s.TryLock(ctx, conv); !errors.Is(err, sessions.ErrLocked) {
		t.Fatalf("second TryLock = %v; want ErrLocked", err)
	}
	// Another holder's token must not release or write through our lock:
	// simulate expiry plus a new owner.
	lockKey := r.Prefix + "conv:{" + conv + "}:lock"
	r.Client.Set(ctx, lockKey, "someone-else", time.Minute)
	if _, err := s.CommitTurn(ctx, l, []sessions.Message{user("late")}, nil); !errors.Is(err, sessions.ErrLockLost) {
		t.Fatalf("CommitTurn after losing the lock = %v; want ErrLockLost", err)
	}
	if h, _ := s.History(ctx, conv); len(h) != 0 {
		t.Fatalf("a holder that lost its lock wrote %d messages", len(h))
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if v := r.Client.Get(ctx, lockKey).Val(); v != "someone-else" {
		t.Fatalf("Release deleted another owner's lock (now %q)", v)
	}
}

func TestLockRenewsWhileHeldAndExpiresWhenHolderDies(t *testing.T) {
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{LockTTL: time.Second})
	conv := "console:::renew"
	l := lock(t, s, conv)
	// Hold past two TTLs: renewal must keep it.
	time.Sleep(2200 * time.Millisecond)
	if l.Lost() {
		t.Fatal("lock lost although its holder was alive")
	}
	if _, err := s.TryLock(ctx, conv); !errors.Is(err, sessions.ErrLocked) {
		t.Fatalf("TryLock while renewed = %v; want ErrLocked", err)
	}
	if _, err := s.CommitTurn(ctx, l, []sessions.Message{user("x")}, nil); err != nil {
		t.Fatalf("CommitTurn with a renewed lock: %v", err)
	}
	l.Release(ctx)

	// A dead holder: a lock key nobody renews expires within its TTL.
	lockKey := r.Prefix + "conv:{" + conv + "}:lock"
	r.Client.Set(ctx, lockKey, "dead-replica", time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for {
		l2, err := s.TryLock(ctx, conv)
		if err == nil {
			l2.Release(ctx)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead holder's lock never expired: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLockRenewalEndsWithItsContext: the renewal goroutine belongs to the
// context the lock was taken with; once it ends nothing renews the lock,
// which expires within its TTL, and Release still works.
func TestLockRenewalEndsWithItsContext(t *testing.T) {
	s, r := newStore(t, sessions.Options{LockTTL: time.Second})
	conv := "console:::renew-ctx"
	ctx, cancel := context.WithCancel(context.Background())
	l, err := s.TryLock(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	lockKey := r.Prefix + "conv:{" + conv + "}:lock"
	deadline := time.Now().Add(5 * time.Second)
	for r.Client.Exists(context.Background(), lockKey).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("the lock was still renewed after its context ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release after the context ended: %v", err)
	}
}

func TestSeenDeduplicates(t *testing.T) {
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{})
	var firsts int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dup, err := s.Seen(ctx, "slack", "Ev123")
			if err != nil {
				t.Error(err)
				return
			}
			if !dup {
				mu.Lock()
				firsts++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firsts != 1 {
		t.Fatalf("%d callers saw Ev123 first; want exactly 1", firsts)
	}
	ttl := r.Client.TTL(ctx, r.Prefix+"dedupe:slack:Ev123").Val()
	if ttl < 23*time.Hour || ttl > 24*time.Hour {
		t.Fatalf("dedupe TTL = %v; want 24h", ttl)
	}
	if dup, _ := s.Seen(ctx, "feishu", "Ev123"); dup {
		t.Fatal("the same id on another platform counted as a duplicate")
	}
}

func TestReplaceHistoryAndClear(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t, sessions.Options{})
	conv := "console:::c"
	l := lock(t, s, conv)
	if _, err := s.CommitTurn(ctx, l, []sessions.Message{user("a"), user("b"), user("c")}, nil); err != nil {
		t.Fatal(err)
	}
	summary := sessions.Message{Role: "user", Content: "summary", Kind: sessions.KindSummary}
	if err := s.ReplaceHistory(ctx, l, []sessions.Message{summary, user("c")}); err != nil {
		t.Fatal(err)
	}
	h, _ := s.History(ctx, conv)
	if len(h) != 2 || h[0].Kind != sessions.KindSummary {
		t.Fatalf("after replace: %+v", h)
	}
	if err := s.Clear(ctx, conv); err != nil {
		t.Fatal(err)
	}
	if h, _ := s.History(ctx, conv); len(h) != 0 {
		t.Fatalf("after clear: %+v", h)
	}
}

func TestConversationKeysShareOneHashTag(t *testing.T) {
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{})
	conv := "feishu:tenant:oc_1:omt_9"
	l := lock(t, s, conv)
	s.Enqueue(ctx, conv, []byte("x"), 10)
	s.CommitTurn(ctx, l, []sessions.Message{user("x")}, []byte("x"))
	keys := r.Client.Keys(ctx, r.Prefix+"*").Val()
	if len(keys) == 0 {
		t.Fatal("no keys written")
	}
	for _, k := range keys {
		want := r.Prefix + "conv:{" + conv + "}:"
		if len(k) < len(want) || k[:len(want)] != want {
			t.Errorf("key %q lacks the conversation hash tag %q", k, want)
		}
	}
}

func TestMemoryStoreExpiresKeys(t *testing.T) {
	ctx := context.Background()
	s, err := sessions.NewMemory(sessions.Options{LockTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	s.Client().Set(ctx, "parley:conv:{x}:lock", "dead", time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for s.Client().Exists(ctx, "parley:conv:{x}:lock").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("the in-memory store never expires keys")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestEnqueueStopsAtTheLimit(t *testing.T) {
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{HistoryTTL: time.Hour})
	conv := "wechat:bot:user:"
	for i := 1; i <= 3; i++ {
		if n, err := s.Enqueue(ctx, conv, []byte(fmt.Sprint(i)), 3); err != nil || n != int64(i) {
			t.Fatalf("Enqueue %d = %d, %v", i, n, err)
		}
	}
	if _, err := s.Enqueue(ctx, conv, []byte("4"), 3); !errors.Is(err, sessions.ErrQueueFull) {
		t.Fatalf("Enqueue over the limit = %v; want ErrQueueFull", err)
	}
	key := r.Prefix + "conv:{" + conv + "}:inbox"
	if n := r.Client.LLen(ctx, key).Val(); n != 3 {
		t.Fatalf("inbox holds %d; want 3", n)
	}
	if ttl := r.Client.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("inbox TTL = %v", ttl)
	}
}

func TestOrphansAreQueuesWithoutAHolder(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t, sessions.Options{})
	s.Enqueue(ctx, "slack:T:C:1", []byte("a"), 10) // queued, nobody holds it
	s.Enqueue(ctx, "slack:T:C:2", []byte("b"), 10) // queued and being served
	lock(t, s, "slack:T:C:2")
	l3 := lock(t, s, "slack:T:C:3") // served to the end
	s.Enqueue(ctx, "slack:T:C:3", []byte("c"), 10)
	if _, err := s.CommitTurn(ctx, l3, []sessions.Message{user("c")}, []byte("c")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Orphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[slack:T:C:1]" {
		t.Fatalf("Orphans = %v; want only the unheld queue", got)
	}
}
