package sessions_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/sessions"
	"github.com/redis/go-redis/v9"
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

// accept queues item on conv, which must take it.
func accept(t *testing.T, s sessions.Store, conv string, a sessions.Arrival) {
	t.Helper()
	if a.Limit == 0 {
		a.Limit = 10
	}
	got, err := s.Accept(context.Background(), conv, a)
	if err != nil || got != sessions.Queued {
		t.Fatalf("Accept(%q) = %v, %v; want Queued", a.Item, got, err)
	}
}

// claim takes conv, which must have something queued.
func claim(t *testing.T, s sessions.Store, conv string) *sessions.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), conv)
	if err != nil || c == nil {
		t.Fatalf("Claim(%q) = %v, %v; want a claim", conv, c, err)
	}
	t.Cleanup(func() { c.Lock.Release(context.Background()) })
	return c
}

func TestCompleteAppendsAcksTrimsAndReleases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{MaxMessages: 4, HistoryTTL: time.Hour})
	conv := "slack:T1:C1:1700.1"
	for _, item := range []string{"m1", "m2"} {
		accept(t, s, conv, sessions.Arrival{Item: []byte(item)})
	}
	c := claim(t, s, conv)
	if string(c.Item) != "m1" || c.Queued != 2 || c.History.Len() != 0 {
		t.Fatalf("claim = item %q, queued %d, history %d; want m1, 2, 0", c.Item, c.Queued, c.History.Len())
	}
	turn := []sessions.Message{user("hi"), {Role: "assistant", Content: "hello", ToolCalls: []sessions.ToolCall{{ID: "c1", Name: "x", Arguments: "{}"}}}, {Role: "tool", ToolCallID: "c1", Content: "ok"}}
	done, err := s.Complete(ctx, c.Lock, c.Item, turn)
	if err != nil || done.Trimmed || done.Queued != 1 {
		t.Fatalf("Complete = %+v, %v; want no trim, 1 still queued", done, err)
	}
	if n := r.Client.Exists(ctx, r.Prefix+"conv:{"+conv+"}:lock").Val(); n != 0 {
		t.Fatal("Complete left the lock behind")
	}
	c = claim(t, s, conv)
	if string(c.Item) != "m2" || c.Queued != 1 {
		t.Fatalf("second claim = %q, %d; want m2 (m1 acknowledged with the turn), 1", c.Item, c.Queued)
	}
	got, err := c.History.Messages()
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
	done, err = s.Complete(ctx, c.Lock, c.Item, []sessions.Message{user("again"), {Role: "assistant", Content: "yes"}})
	if err != nil || !done.Trimmed || done.Queued != 0 {
		t.Fatalf("second Complete = %+v, %v; want trimmed, nothing queued", done, err)
	}
	h, _ := s.History(ctx, conv)
	if len(h) != 4 || h[3].Content != "yes" || h[0].Role != "assistant" {
		t.Fatalf("trimmed history = %+v; want the newest 4", h)
	}
	if c, err := s.Claim(ctx, conv); c != nil || err != nil {
		t.Fatalf("Claim of an empty inbox = %v, %v; want nil, nil", c, err)
	}
}

func TestLockIsExclusiveAndOwned(t *testing.T) {
	t.Parallel()
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
	if _, err := s.Complete(ctx, l, nil, []sessions.Message{user("late")}); !errors.Is(err, sessions.ErrLockLost) {
		t.Fatalf("Complete after losing the lock = %v; want ErrLockLost", err)
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
	t.Parallel()
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
	if !l.Held() {
		t.Fatal("Held = false for a lock renewed a moment ago")
	}
	if _, err := s.Complete(ctx, l, nil, []sessions.Message{user("x")}); err != nil {
		t.Fatalf("Complete with a renewed lock: %v", err)
	}
	if l.Held() {
		t.Fatal("Held = true after Complete released the lock")
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, sessions.Options{})
	conv := "console:::c"
	if _, err := s.Complete(ctx, lock(t, s, conv), nil, []sessions.Message{user("a"), user("b"), user("c")}); err != nil {
		t.Fatal(err)
	}
	l := lock(t, s, conv)
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
	t.Parallel()
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{})
	conv := "feishu:tenant:oc_1:omt_9"
	accept(t, s, conv, sessions.Arrival{Item: []byte("x"), ID: "Ev1", Marks: []string{"followed"}})
	c := claim(t, s, conv)
	if _, err := s.Complete(ctx, c.Lock, c.Item, []sessions.Message{user("x")}); err != nil {
		t.Fatal(err)
	}
	keys := r.Client.Keys(ctx, r.Prefix+"*").Val()
	if len(keys) < 4 {
		t.Fatalf("keys written: %v; want the history, the de-dup record, the mark and the receipt", keys)
	}
	for _, k := range keys {
		want := r.Prefix + "conv:{" + conv + "}:"
		if len(k) < len(want) || k[:len(want)] != want {
			t.Errorf("key %q lacks the conversation hash tag %q", k, want)
		}
	}
}

func TestMemoryStoreExpiresKeys(t *testing.T) {
	t.Parallel()
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

func TestOrphansAreQueuesWithoutAHolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, sessions.Options{})
	accept(t, s, "slack:T:C:1", sessions.Arrival{Item: []byte("a")}) // queued, nobody holds it
	accept(t, s, "slack:T:C:2", sessions.Arrival{Item: []byte("b")}) // queued and being served
	claim(t, s, "slack:T:C:2")
	accept(t, s, "slack:T:C:3", sessions.Arrival{Item: []byte("c")}) // served to the end
	c3 := claim(t, s, "slack:T:C:3")
	if _, err := s.Complete(ctx, c3.Lock, c3.Item, []sessions.Message{user("c")}); err != nil {
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

// TestTheEmbeddedStoreIsNotAnOpenDoor (issue 12, item 10): the in-memory
// store's server listens on loopback only and refuses a client without its
// random password, whatever the client asks first.
func TestTheEmbeddedStoreIsNotAnOpenDoor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sessions.NewMemory(sessions.Options{LockTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("the store cannot reach its own server: %v", err)
	}
	own, ok := s.Client().(*redis.Client)
	if !ok {
		t.Fatalf("client is %T", s.Client())
	}
	addr := own.Options().Addr
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		t.Fatalf("the embedded server listens on %s; want a loopback address", addr)
	}
	if own.Options().Password == "" {
		t.Fatal("the embedded server has no password")
	}
	other, err := sessions.NewMemory(sessions.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	if other.Client().(*redis.Client).Options().Password == own.Options().Password {
		t.Fatal("two embedded servers share a password: it is not random")
	}
	s.Client().Set(ctx, "parley:secret", "history", 0)

	for _, tt := range []struct {
		name, password string
	}{{"no password", ""}, {"wrong password", "parley"}, {"empty-ish password", " "}} {
		t.Run(tt.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: addr, Password: tt.password, MaxRetries: -1})
			defer c.Close()
			if err := c.Ping(ctx).Err(); err == nil {
				t.Fatal("PING answered without the password")
			}
			if v, err := c.Get(ctx, "parley:secret").Result(); err == nil || v != "" {
				t.Fatalf("GET = %q, %v; want a refusal", v, err)
			}
		})
	}
	// Raw RESP, as a scanner would speak it: every command is refused.
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	rd := bufio.NewReader(conn)
	for _, cmd := range []string{"PING", "KEYS *", "GET parley:secret", "CONFIG GET *", "AUTH default guess"} {
		args := strings.Fields(cmd)
		fmt.Fprintf(conn, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(conn, "$%d\r\n%s\r\n", len(a), a)
		}
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if !strings.HasPrefix(line, "-") {
			t.Errorf("%s answered %q without the password; want an error", cmd, strings.TrimSpace(line))
		}
	}
}
