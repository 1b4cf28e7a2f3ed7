package sessions_test

import (
	"context"
	"testing"
	"time"

	"github.com/parleyhq/parley/sessions"
)

// TestReplyMailbox: replies posted for a message are taken in order, once
// each, and expire when nobody takes them.
func TestReplyMailbox(t *testing.T) {
	t.Parallel()
	s, r := newStore(t, sessions.Options{})
	ctx := context.Background()
	if _, ok, err := s.TakeReply(ctx, "m1"); ok || err != nil {
		t.Fatalf("empty mailbox: ok %v, err %v", ok, err)
	}
	for _, body := range []string{"first", "second"} {
		if err := s.PostReply(ctx, "m1", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"first", "second"} {
		got, ok, err := s.TakeReply(ctx, "m1")
		if err != nil || !ok || string(got) != want {
			t.Fatalf("TakeReply = %q, %v, %v; want %q", got, ok, err, want)
		}
	}
	if _, ok, _ := s.TakeReply(ctx, "m1"); ok {
		t.Fatal("a reply was taken twice")
	}
	if err := s.PostReply(ctx, "m2", []byte("unclaimed")); err != nil {
		t.Fatal(err)
	}
	ttl, err := r.Client.TTL(ctx, s.Prefix()+"reply:m2").Result()
	if err != nil || ttl <= 0 || ttl > sessions.ReplyTTL || ttl < sessions.ReplyTTL-time.Minute {
		t.Fatalf("TTL = %v, %v; want about %v", ttl, err, sessions.ReplyTTL)
	}
}
