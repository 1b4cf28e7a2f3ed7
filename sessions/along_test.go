package sessions_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/sessions"
)

// TestWritesAlongACompletionShareItsRoundTrip: what rides with a
// completion goes in its pipeline (one round trip with it), runs whether
// or not the lock is still held, and runs once when Redis has forgotten
// the completion's script (the completion alone is run again, once).
func TestWritesAlongACompletionShareItsRoundTrip(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		flush      bool // Redis forgot its scripts (a restart)
		stolen     bool // another holder took the lock
		wantTrips  int64
		wantLost   bool
		wantLength int64
	}{
		{name: "held", wantTrips: 1, wantLength: 2},
		{name: "scripts forgotten", flush: true, wantTrips: 3, wantLength: 2}, // the pipeline, EVALSHA alone, EVAL
		{name: "lock lost", stolen: true, wantTrips: 1, wantLost: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s, r := newStore(t, sessions.Options{})
			if c.flush {
				// Its SCRIPT FLUSH is of the whole server: one of its own.
				r = redistest.NewOwn(t)
				s = sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix})
			}
			// A first completion loads the script and opens the connection.
			accept(t, s, "console:::warm", sessions.Arrival{Item: []byte("m0")})
			warm := claim(t, s, "console:::warm")
			if _, err := s.Complete(ctx, warm.Lock, warm.Item, nil, func(redis.Pipeliner) {}); err != nil {
				t.Fatal(err)
			}
			conv := "console:::along"
			accept(t, s, conv, sessions.Arrival{Item: []byte("m1")})
			cl := claim(t, s, conv)
			if c.flush {
				if err := r.Client.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if c.stolen {
				if err := r.Client.Set(ctx, r.Prefix+"conv:{"+conv+"}:lock", "another", time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
			}
			rt := redistest.CountRoundTrips(r.Client)
			var counted *redis.IntCmd
			other := r.Prefix + "elsewhere" // another hash slot than the conversation's
			_, err := s.Complete(ctx, cl.Lock, cl.Item, []sessions.Message{user("m1"), {Role: "assistant", Content: "a1"}},
				func(p redis.Pipeliner) { counted = p.Incr(ctx, other) })
			if got := errors.Is(err, sessions.ErrLockLost); got != c.wantLost || (err != nil && !got) {
				t.Fatalf("Complete = %v; want lock lost %v", err, c.wantLost)
			}
			if n := rt.Load(); n != c.wantTrips {
				t.Errorf("%d round trips; want %d", n, c.wantTrips)
			}
			if counted == nil || counted.Err() != nil || counted.Val() != 1 {
				t.Errorf("the write along = %v; want it run once", counted)
			}
			if n := r.Client.Get(ctx, other).Val(); n != "1" {
				t.Errorf("the key written along holds %q; want 1", n)
			}
			if n := r.Client.LLen(ctx, r.Prefix+"conv:{"+conv+"}:history").Val(); n != c.wantLength {
				t.Errorf("history holds %d; want %d", n, c.wantLength)
			}
		})
	}
}

// The embedded store (miniredis) runs a completion's pipeline too.
func TestTheEmbeddedStoreCompletesWithWritesAlong(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sessions.NewMemory(sessions.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	conv := "console:::along"
	accept(t, s, conv, sessions.Arrival{Item: []byte("m1")})
	cl := claim(t, s, conv)
	var counted *redis.IntCmd
	if _, err := s.Complete(ctx, cl.Lock, cl.Item, []sessions.Message{user("m1"), {Role: "assistant", Content: "a1"}},
		func(p redis.Pipeliner) { counted = p.Incr(ctx, "elsewhere") }); err != nil {
		t.Fatal(err)
	}
	if counted.Val() != 1 {
		t.Errorf("the write along = %v", counted)
	}
	if h, err := s.History(ctx, conv); err != nil || len(h) != 2 {
		t.Errorf("history = %+v, %v", h, err)
	}
}
