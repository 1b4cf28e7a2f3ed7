package sessions_test

import (
	"context"
	"testing"
	"time"

	"github.com/parleyhq/parley/sessions"
)

func TestInventoryListsConversationsMostRecentFirst(t *testing.T) {
	t.Parallel()
	s, r := newStore(t, sessions.Options{HistoryTTL: 24 * time.Hour})
	ctx := context.Background()
	// a: an older history; b: a newer one with a message queued and a
	// turn running; c: only a queued message, nobody holding it.
	for _, conv := range []string{"slack:T1:C1:a", "slack:T1:C2:b"} {
		l := lock(t, s, conv)
		if _, err := s.Complete(ctx, l, nil, []sessions.Message{user("hi"), {Role: "assistant", Content: "hello"}}); err != nil {
			t.Fatal(err)
		}
	}
	// a's last turn was an hour ago: its TTL has run down by an hour.
	if err := r.Client.PExpire(ctx, r.Prefix+"conv:{slack:T1:C1:a}:history", 23*time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	accept(t, s, "slack:T1:C2:b", sessions.Arrival{Item: []byte("queued")})
	lock(t, s, "slack:T1:C2:b")
	accept(t, s, "feishu:tn:oc:c", sessions.Arrival{Item: []byte("queued 1")})
	accept(t, s, "feishu:tn:oc:c", sessions.Arrival{Item: []byte("queued 2")})

	inv, err := s.Inventory(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Total != 3 || inv.Queued != 3 || inv.QueuedConvs != 2 || inv.Orphaned != 1 || inv.Truncated {
		t.Fatalf("totals %+v", inv)
	}
	got := inv.Conversations
	if len(got) != 3 || got[0].Key != "slack:T1:C2:b" || got[1].Key != "slack:T1:C1:a" || got[2].Key != "feishu:tn:oc:c" {
		t.Fatalf("order %+v", got)
	}
	if b := got[0]; b.Messages != 2 || b.Queued != 1 || !b.Locked || time.Since(b.LastActive) > time.Minute {
		t.Fatalf("b %+v", b)
	}
	if a := got[1]; a.Locked || a.Queued != 0 || time.Since(a.LastActive).Round(time.Minute) != time.Hour {
		t.Fatalf("a %+v", a)
	}
	if c := got[2]; c.Messages != 0 || c.Queued != 2 || c.Locked || !c.LastActive.IsZero() {
		t.Fatalf("c %+v", c)
	}
	inv, err = s.Inventory(ctx, 1)
	if err != nil || len(inv.Conversations) != 1 || inv.Total != 3 {
		t.Fatalf("limit 1: %+v, %v", inv, err)
	}
	if n, err := s.HistoryLen(ctx, "slack:T1:C1:a"); n != 2 || err != nil {
		t.Fatalf("HistoryLen = %d, %v", n, err)
	}
}
