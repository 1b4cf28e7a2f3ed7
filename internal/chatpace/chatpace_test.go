package chatpace_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/internal/chatpace"
	"github.com/parleyhq/parley/internal/redistest"
)

// TestABurstIsSharedAcrossReplicas: after a quiet spell a chat takes up
// to burst posts at once, counted over every replica (two clients of one
// Redis here), and the next one waits for the rate. The interval is an
// hour so that "waits" cannot be mistaken for a slow machine: the posts
// of the burst return without sleeping, the one after it cannot return
// before its context ends.
func TestABurstIsSharedAcrossReplicas(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	other := redis.NewClient(&redis.Options{Addr: r.Client.(*redis.Client).Options().Addr})
	t.Cleanup(func() { other.Close() })
	replicas := []chatpace.Pacer{{Client: r.Client, Prefix: r.Prefix}, {Client: other, Prefix: r.Prefix}}
	// A burst that is not let through fails here rather than hanging.
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	const every, burst = time.Hour, 3
	for i := range burst {
		if err := replicas[i%2].Wait(ctx, "slack", "T1", "C1", every, burst); err != nil {
			t.Fatalf("post %d of the burst: %v", i+1, err)
		}
	}
	held, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := replicas[1].Wait(held, "slack", "T1", "C1", every, burst); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the post after a burst of %d = %v; want it held for the rate (one an hour)", burst, err)
	}
	// Another chat has its own budget.
	if err := replicas[0].Wait(ctx, "slack", "T1", "C2", every, burst); err != nil {
		t.Fatalf("another chat's first post: %v", err)
	}
}

// TestWithoutABurstEveryPostTakesItsTurn: burst 1 (and below) is the
// plain rate: the second post of a quiet chat already waits.
func TestWithoutABurstEveryPostTakesItsTurn(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	p := chatpace.Pacer{Client: r.Client, Prefix: r.Prefix}
	for _, burst := range []int{1, 0} {
		chat := "C" + string(rune('0'+burst))
		if err := p.Wait(context.Background(), "slack", "T1", chat, time.Hour, burst); err != nil {
			t.Fatal(err)
		}
		held, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := p.Wait(held, "slack", "T1", chat, time.Hour, burst)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("burst %d: the second post = %v; want it held for the rate", burst, err)
		}
	}
}
