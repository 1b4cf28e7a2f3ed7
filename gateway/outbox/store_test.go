package outbox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestDeadReplicasClaimExpires: a claim that is never given back (its
// replica was killed mid-attempt) comes due again when its lease ends;
// the dead claim can then record nothing, and the new one resumes at the
// first part not recorded.
func TestDeadReplicasClaimExpires(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	s := newStore(r.Client, r.Prefix)
	ctx := context.Background()
	it := &Item{ID: "i1", Message: channels.Message{Channel: "slack", Chat: "C1"}, Parts: []string{"one", "two", "three"}, Sent: []string{"ts1"}}
	if err := s.add(ctx, it, 0); err != nil {
		t.Fatal(err)
	}
	lease := 300 * time.Millisecond
	dead, _, _, err := s.claim(ctx, lease)
	if err != nil || dead == nil {
		t.Fatalf("claim = %v, %v", dead, err)
	}
	if len(dead.Sent) != 1 || dead.Sent[0] != "ts1" || dead.Attempts != 1 {
		t.Fatalf("claimed %+v; want part 1 recorded as ts1, first attempt", dead)
	}
	if got, wait, _, err := s.claim(ctx, lease); err != nil || got != nil || wait <= 0 {
		t.Fatalf("a leased item was claimed again: %+v, wait %v, %v", got, wait, err)
	}
	var next *Item
	deadline := time.Now().Add(30 * time.Second)
	for next == nil {
		if time.Now().After(deadline) {
			t.Fatal("the dead claim never expired")
		}
		time.Sleep(20 * time.Millisecond)
		if next, _, _, err = s.claim(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if next.Attempts != 2 || len(next.Sent) != 1 {
		t.Errorf("reclaimed %+v; want the second attempt, resuming at part 2", next)
	}
	if _, err := s.posted(ctx, dead, "ts-dead", lease); !errors.Is(err, errLeaseLost) {
		t.Errorf("the dead claim recorded a post: %v", err)
	}
	if err := s.release(ctx, dead, 0); !errors.Is(err, errLeaseLost) {
		t.Errorf("the dead claim released the item: %v", err)
	}
	if err := s.fail(ctx, dead, "x"); !errors.Is(err, errLeaseLost) {
		t.Errorf("the dead claim failed the item: %v", err)
	}
	for i, id := range []string{"ts2", "ts3"} {
		done, err := s.posted(ctx, next, id, time.Minute)
		if err != nil || done != (i == 1) {
			t.Fatalf("posted(%s) = %v, %v", id, done, err)
		}
	}
	rec, ok, err := s.lookup(ctx, "i1")
	if err != nil || !ok || rec.Outcome != "sent" || len(rec.Sent) != 3 || rec.Sent[2] != "ts3" {
		t.Errorf("record = %+v, %v, %v; want sent with three ids", rec, ok, err)
	}
	if n, _ := s.pending(ctx); n != 0 {
		t.Errorf("%d pending after delivery", n)
	}
	if ttl := r.Client.PTTL(ctx, s.item("i1")).Val(); ttl <= 0 || ttl > doneTTL {
		t.Errorf("the finished item's TTL is %v, want up to %v", ttl, doneTTL)
	}
}

// TestUndecodableItemIsFailedNotRetried: an item nobody can read (written
// by hand, or by a future version) is failed once, not claimed forever.
func TestUndecodableItemIsFailedNotRetried(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	s := newStore(r.Client, r.Prefix)
	ctx := context.Background()
	r.Client.HSet(ctx, s.item("bad"), "data", "{not json", "total", 1, "sent", 0)
	r.Client.ZAdd(ctx, s.due(), redisZ(0, "bad"))
	o := New(r.Client, r.Prefix, Config{Poll: 10 * time.Millisecond}, nil, nil)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); o.Run(runCtx, func(string) channels.Poster { return nil }) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n, _ := s.pending(ctx); n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the undecodable item stayed pending")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if rec, ok, _ := s.lookup(ctx, "bad"); !ok || rec.Outcome != "failed" {
		t.Errorf("record = %+v, %v; want failed", rec, ok)
	}
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

// TestScriptsRunOnARedisCluster: every script's keys share one hash tag,
// so the outbox and the pacer work on a Redis Cluster.
func TestScriptsRunOnARedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t)
	ctx := context.Background()
	s := newStore(c.Client, c.Prefix)
	it := &Item{ID: "c1", Message: channels.Message{Channel: "slack", Chat: "C1"}, Parts: []string{"one", "two"}}
	if err := s.add(ctx, it, 0); err != nil {
		t.Fatal(err)
	}
	got, _, _, err := s.claim(ctx, time.Minute)
	if err != nil || got == nil {
		t.Fatalf("claim = %v, %v", got, err)
	}
	if err := s.release(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	if got, _, _, err = s.claim(ctx, time.Minute); err != nil || got == nil {
		t.Fatalf("claim again = %v, %v", got, err)
	}
	for _, id := range []string{"ts1", "ts2"} {
		if _, err := s.posted(ctx, got, id, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	it2 := &Item{ID: "c2", Message: channels.Message{Channel: "slack", Chat: "C1"}, Parts: []string{"x"}}
	if err := s.add(ctx, it2, 0); err != nil {
		t.Fatal(err)
	}
	if got, _, _, err = s.claim(ctx, time.Minute); err != nil || got == nil {
		t.Fatal(err)
	}
	if err := s.fail(ctx, got, "test"); err != nil {
		t.Fatal(err)
	}
	p := &pacer{client: c.Client, prefix: c.Prefix}
	m := channels.Message{Channel: "slack", Workspace: "T1", Chat: "C1"}
	if err := p.hold(ctx, m, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(ctx, m, channels.Pace{Every: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
}
