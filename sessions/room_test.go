package sessions_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/sessions"
)

// completeWith runs one turn of conv (queued item, claimed, completed)
// whose Complete carries the room write w, sent sends times.
func completeWith(t *testing.T, s *sessions.RedisStore, conv string, w sessions.RoomWrite, sends int) {
	t.Helper()
	ctx := context.Background()
	accept(t, s, conv, sessions.Arrival{Item: fmt.Appendf(nil, "item %d", time.Now().UnixNano())})
	c := claim(t, s, conv)
	for i := 0; i < sends; i++ {
		// A Complete tried again (its first reply lost) sends the write
		// again; the receipt answers the second.
		s.WriteWithTurn(c.Lock, w)
		if _, err := s.Complete(ctx, c.Lock, c.Item, nil); err != nil {
			t.Fatalf("Complete #%d: %v", i+1, err)
		}
	}
}

func roomOf(t *testing.T, s *sessions.RedisStore, conv string) sessions.RoomState {
	t.Helper()
	st, err := s.Room(context.Background(), conv)
	if err != nil {
		t.Fatalf("Room: %v", err)
	}
	return st
}

// TestRoomWritesRideWithTheTurn: ambient messages kept by the turns of
// unanswered messages are read oldest first by the next turn, which drops
// exactly those it read and sets the cursor; a write sent twice (a
// Complete tried again) lands once.
func TestRoomWritesRideWithTheTurn(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, sessions.Options{})
	const conv = "wechat:bot:group1:"
	if st := roomOf(t, s, conv); st.Cursor != "" || len(st.Ambient) != 0 || st.Taken != 0 {
		t.Fatalf("empty room = %+v", st)
	}
	completeWith(t, s, conv, sessions.RoomWrite{Ambient: []byte("one")}, 2)
	completeWith(t, s, conv, sessions.RoomWrite{Ambient: []byte("two")}, 1)
	st := roomOf(t, s, conv)
	if got := fmt.Sprintf("%s", st.Ambient); got != "[one two]" || st.Taken != 2 {
		t.Fatalf("ambient = %s (taken %d), want [one two] once each", got, st.Taken)
	}
	// One more arrives after the read, before the reading turn commits:
	// it stays for the next turn.
	completeWith(t, s, conv, sessions.RoomWrite{Ambient: []byte("three")}, 1)
	completeWith(t, s, conv, sessions.RoomWrite{Cursor: "1700000000.000100", Taken: st.Taken}, 2)
	st = roomOf(t, s, conv)
	if st.Cursor != "1700000000.000100" || fmt.Sprintf("%s", st.Ambient) != "[three]" {
		t.Fatalf("after the reading turn: %+v, want the cursor and [three]", st)
	}
}

// TestRoomWriteOfAnUnwrittenTurnChangesNothing: a turn whose lock was
// lost is not written, and neither is its room: the next holder reads the
// same room again.
func TestRoomWriteOfAnUnwrittenTurnChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{})
	const conv = "slack:T1:C1:1.0"
	completeWith(t, s, conv, sessions.RoomWrite{Cursor: "5"}, 1)
	accept(t, s, conv, sessions.Arrival{Item: []byte("m")})
	c := claim(t, s, conv)
	if err := r.Client.Set(ctx, r.Prefix+"conv:{"+conv+"}:lock", "another", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	s.WriteWithTurn(c.Lock, sessions.RoomWrite{Cursor: "9", Ambient: []byte("x")})
	if _, err := s.Complete(ctx, c.Lock, c.Item, nil); err == nil {
		t.Fatal("Complete succeeded on a stolen lock")
	}
	if st := roomOf(t, s, conv); st.Cursor != "5" || len(st.Ambient) != 0 {
		t.Fatalf("room after a lost lock = %+v, want cursor 5 and no ambient", st)
	}
}

// TestAmbientBufferIsBounded: the buffer keeps the newest within its
// count and bytes, and a read skips (and counts for dropping) entries
// older than its age.
func TestAmbientBufferIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{AmbientMessages: 3, AmbientBytes: 64, AmbientAge: time.Hour})
	const conv = "wechat:bot:g:"
	for i := range 5 {
		completeWith(t, s, conv, sessions.RoomWrite{Ambient: fmt.Appendf(nil, "m%d", i)}, 1)
	}
	if got := fmt.Sprintf("%s", roomOf(t, s, conv).Ambient); got != "[m2 m3 m4]" {
		t.Fatalf("count bound: %s, want [m2 m3 m4]", got)
	}
	completeWith(t, s, conv, sessions.RoomWrite{Ambient: []byte(strings.Repeat("b", 40))}, 1)
	if st := roomOf(t, s, conv); len(st.Ambient) != 1 || len(st.Ambient[0]) != 40 {
		t.Fatalf("bytes bound: %q, want only the newest", st.Ambient)
	}
	// An entry far older than the age, at the head.
	if err := r.Client.LPush(ctx, r.Prefix+"conv:{"+conv+"}:ambient", "1000|ancient").Err(); err != nil {
		t.Fatal(err)
	}
	st := roomOf(t, s, conv)
	if len(st.Ambient) != 1 || st.Taken != 2 {
		t.Fatalf("age bound: %q taken %d, want the 40 bytes and 2 taken", st.Ambient, st.Taken)
	}
	if err := s.WriteRoom(ctx, conv, sessions.RoomWrite{Taken: st.Taken, Cursor: "c"}); err != nil {
		t.Fatal(err)
	}
	if st := roomOf(t, s, conv); len(st.Ambient) != 0 || st.Cursor != "c" {
		t.Fatalf("after WriteRoom: %+v", st)
	}
	ttl, err := r.Client.PTTL(ctx, r.Prefix+"conv:{"+conv+"}:room").Result()
	if err != nil || ttl <= 0 {
		t.Fatalf("cursor TTL = %v, %v; want it to expire with the history", ttl, err)
	}
}

// TestRoomWriteOfARedisThatForgotItsScripts: a Redis that forgot its
// scripts (restarted) runs the completion with the room's write in it
// again by itself: the write lands, once.
func TestRoomWriteOfARedisThatForgotItsScripts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{})
	const conv = "slack:T1:C1:2.0"
	completeWith(t, s, conv, sessions.RoomWrite{Cursor: "5"}, 1)
	if err := r.Client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	completeWith(t, s, conv, sessions.RoomWrite{Cursor: "7"}, 1)
	if st := roomOf(t, s, conv); st.Cursor != "7" {
		t.Fatalf("cursor = %q, want 7", st.Cursor)
	}
}

// TestTheEmbeddedStoreWritesTheRoomWithTheTurn: the in-memory store's Lua
// (miniredis) runs the completion's room write as Redis does.
func TestTheEmbeddedStoreWritesTheRoomWithTheTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sessions.NewMemory(sessions.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	const conv = "console:::room"
	completeWith(t, s, conv, sessions.RoomWrite{Ambient: []byte("one")}, 2)
	completeWith(t, s, conv, sessions.RoomWrite{Cursor: "c1", Ambient: []byte("two")}, 1)
	st, err := s.Room(ctx, conv)
	if err != nil || st.Cursor != "c1" || fmt.Sprintf("%s", st.Ambient) != "[one two]" {
		t.Fatalf("room = %+v, %v; want cursor c1 and [one two], once each", st, err)
	}
}
