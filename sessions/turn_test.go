package sessions_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/sessions"
)

// TestAcceptIsOneStep: the de-dup record, the marks and the enqueue happen
// together or not at all, whatever the arrival.
func TestAcceptIsOneStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{HistoryTTL: time.Hour, DedupeTTL: 2 * time.Hour})
	conv := "slack:T1:C1:1.1"
	key := func(kind string) string { return r.Prefix + "conv:{" + conv + "}:" + kind }
	exists := func(k string) bool { return r.Client.Exists(ctx, k).Val() == 1 }
	inbox := func() int64 { return r.Client.LLen(ctx, key("inbox")).Val() }

	cases := []struct {
		name  string
		a     sessions.Arrival
		want  sessions.Acceptance
		depth int64
	}{
		{"required mark missing", sessions.Arrival{Item: []byte("a"), ID: "E0", RequireMark: "followed", Marks: []string{"followed"}}, sessions.Unmarked, 0},
		{"first arrival marks the conversation", sessions.Arrival{Item: []byte("b"), ID: "E1", Marks: []string{"followed"}}, sessions.Queued, 1},
		{"a re-delivery is a duplicate", sessions.Arrival{Item: []byte("b2"), ID: "E1"}, sessions.Duplicate, 1},
		{"required mark present", sessions.Arrival{Item: []byte("c"), ID: "E2", RequireMark: "followed"}, sessions.Queued, 2},
		{"no id is never a duplicate", sessions.Arrival{Item: []byte("d")}, sessions.Queued, 3},
		{"no id is never a duplicate, again", sessions.Arrival{Item: []byte("d")}, sessions.Queued, 4},
		{"full", sessions.Arrival{Item: []byte("e"), ID: "E3", Limit: 4}, sessions.QueueFull, 4},
		{"a full queue's message stays answered", sessions.Arrival{Item: []byte("e"), ID: "E3", Limit: 10}, sessions.Duplicate, 4},
	}
	for _, c := range cases {
		if c.a.Limit == 0 {
			c.a.Limit = 10
		}
		got, err := s.Accept(ctx, conv, c.a)
		if err != nil || got != c.want {
			t.Fatalf("%s: Accept = %v, %v; want %v", c.name, got, err, c.want)
		}
		if n := inbox(); n != c.depth {
			t.Fatalf("%s: inbox holds %d; want %d", c.name, n, c.depth)
		}
	}
	if exists(key("seen:E0")) {
		t.Fatal("an unmarked arrival was recorded as seen: its re-delivery to a followed thread would be dropped")
	}
	if ttl := r.Client.PTTL(ctx, key("seen:E1")).Val(); ttl <= time.Hour || ttl > 2*time.Hour {
		t.Fatalf("de-dup TTL = %v; want the de-dup TTL (2h)", ttl)
	}
	for _, k := range []string{key("mark:followed"), key("inbox")} {
		if ttl := r.Client.PTTL(ctx, k).Val(); ttl <= 0 || ttl > time.Hour {
			t.Fatalf("%s TTL = %v; want the history TTL", k, ttl)
		}
	}
}

func TestClaimTellsWhenAnotherHolderHasTheConversation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{LockTTL: 10 * time.Second})
	conv := "console:::held"
	if c, err := s.Claim(ctx, conv); c != nil || err != nil {
		t.Fatalf("Claim with nothing queued = %v, %v; want nil, nil", c, err)
	}
	if n := r.Client.Exists(ctx, r.Prefix+"conv:{"+conv+"}:lock").Val(); n != 0 {
		t.Fatal("Claim took the lock although nothing was queued")
	}
	accept(t, s, conv, sessions.Arrival{Item: []byte("x")})
	claim(t, s, conv)
	_, err := s.Claim(ctx, conv)
	var locked *sessions.LockedError
	if !errors.Is(err, sessions.ErrLocked) || !errors.As(err, &locked) {
		t.Fatalf("second Claim = %v; want a LockedError", err)
	}
	if locked.Expires <= 9*time.Second || locked.Expires > 10*time.Second {
		t.Fatalf("Expires = %v; want about the lock TTL", locked.Expires)
	}
}

// A claim says whether the conversation keeps an approval record, so that
// a turn that never paused makes no round trip to learn it.
func TestClaimSaysWhetherAnApprovalIsKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{})
	conv := "console:::approval"
	accept(t, s, conv, sessions.Arrival{Item: []byte("x")})
	if c := claim(t, s, conv); c.Approval {
		t.Fatal("Approval set with no record")
	} else if err := c.Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Client.HSet(ctx, s.Key(conv, "approval"), "state", "pending").Err(); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, s, conv); !c.Approval {
		t.Fatal("Approval not set with a record")
	}
}

// TestClaimReadsTheHistoryWhole: the framed reply survives entries holding
// digits, colons, quotes, newlines and multi-byte text, at the length cap.
func TestClaimReadsTheHistoryWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, sessions.Options{MaxMessages: 500})
	conv := "console:::long"
	var want []sessions.Message
	for i := range 200 {
		want = append(want, sessions.Message{Role: "user", Content: strings.Repeat("12:\"34\"\n这是 ", i%7)})
	}
	if _, err := s.Complete(ctx, lock(t, s, conv), nil, want); err != nil {
		t.Fatal(err)
	}
	accept(t, s, conv, sessions.Arrival{Item: []byte("next")})
	c := claim(t, s, conv)
	got, err := c.History.Messages()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("history has %d messages; want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Role != want[i].Role || got[i].Content != want[i].Content {
			t.Fatalf("message %d = %+v; want %+v", i, got[i], want[i])
		}
	}
}

// TestCompleteAfterALostReplyIsNotALostLock: a holder that runs Complete
// again because the reply of the first never arrived learns that its turn
// is written, and nothing is written twice.
func TestCompleteAfterALostReplyIsNotALostLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{})
	conv := "console:::receipt"
	accept(t, s, conv, sessions.Arrival{Item: []byte("m1")})
	accept(t, s, conv, sessions.Arrival{Item: []byte("m2")})
	c := claim(t, s, conv)
	turn := []sessions.Message{user("m1"), {Role: "assistant", Content: "a1"}}
	first, err := s.Complete(ctx, c.Lock, c.Item, turn)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Complete(ctx, c.Lock, c.Item, turn)
	if err != nil || again != first {
		t.Fatalf("Complete again = %+v, %v; want %+v (the receipt)", again, err, first)
	}
	if n := r.Client.LLen(ctx, r.Prefix+"conv:{"+conv+"}:history").Val(); n != 2 {
		t.Fatalf("history holds %d messages; want the turn once (2)", n)
	}
	if n := r.Client.LLen(ctx, r.Prefix+"conv:{"+conv+"}:inbox").Val(); n != 1 {
		t.Fatalf("inbox holds %d; want m2 only", n)
	}
}

// TestTheEmbeddedStoreRunsTheScripts: the in-memory store of a single
// replica (miniredis, a Lua of its own) runs accept, claim and complete as
// Redis does.
func TestTheEmbeddedStoreRunsTheScripts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sessions.NewMemory(sessions.Options{LockTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	conv := "console:::local"
	for i, a := range []sessions.Arrival{
		{Item: []byte("m1"), ID: "E1", Marks: []string{"followed"}, Limit: 10},
		{Item: []byte("m1"), ID: "E1", Limit: 10},
		{Item: []byte("m2"), RequireMark: "followed", Limit: 10},
		{Item: []byte("m3"), RequireMark: "other", Limit: 10},
	} {
		want := []sessions.Acceptance{sessions.Queued, sessions.Duplicate, sessions.Queued, sessions.Unmarked}[i]
		if got, err := s.Accept(ctx, conv, a); err != nil || got != want {
			t.Fatalf("Accept %d = %v, %v; want %v", i, got, err, want)
		}
	}
	c, err := s.Claim(ctx, conv)
	if err != nil || c == nil || string(c.Item) != "m1" || c.Queued != 2 {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	if _, err := s.Claim(ctx, conv); !errors.Is(err, sessions.ErrLocked) {
		t.Fatalf("second Claim = %v; want ErrLocked", err)
	}
	done, err := s.Complete(ctx, c.Lock, c.Item, []sessions.Message{user("m1"), {Role: "assistant", Content: "a1"}})
	if err != nil || done.Queued != 1 {
		t.Fatalf("Complete = %+v, %v", done, err)
	}
	c, err = s.Claim(ctx, conv)
	if err != nil || c == nil || string(c.Item) != "m2" || c.History.Len() != 2 {
		t.Fatalf("Claim after Complete = %+v, %v", c, err)
	}
	c.Lock.Release(ctx)
}

// TestCompleteLeavesAnotherHeadQueued: a completion whose message is no
// longer the inbox's head (it was taken already) leaves the inbox as it
// found it, its expiry too, though taking the head off to look at it
// emptied the list for a moment.
func TestCompleteLeavesAnotherHeadQueued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{HistoryTTL: time.Hour})
	conv := "console:::head"
	inbox := r.Prefix + "conv:{" + conv + "}:inbox"
	accept(t, s, conv, sessions.Arrival{Item: []byte("m1")})
	c := claim(t, s, conv)
	done, err := s.Complete(ctx, c.Lock, []byte("m0"), []sessions.Message{user("m0"), {Role: "assistant", Content: "a0"}})
	if err != nil || done.Queued != 1 {
		t.Fatalf("Complete = %+v, %v; want m1 still queued", done, err)
	}
	if got := r.Client.LRange(ctx, inbox, 0, -1).Val(); len(got) != 1 || got[0] != "m1" {
		t.Errorf("inbox = %q; want m1", got)
	}
	if ttl := r.Client.PTTL(ctx, inbox).Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("inbox TTL = %v; want the history TTL", ttl)
	}
}
