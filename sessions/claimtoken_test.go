package sessions_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/sessions"
)

// loseReplies is a go-redis hook that, while armed, lets a script run on
// Redis and loses its reply on the way back, as a connection cut at that
// moment (Redis killed) does.
type loseReplies struct{ armed atomic.Bool }

func (h *loseReplies) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *loseReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.armed.Load() && strings.HasPrefix(cmd.Name(), "eval") && err == nil {
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return err
	}
}
func (h *loseReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAClaimWhoseReplyWasLostIsTakenAgainAtOnce: a claim that took the
// lock and whose reply never came back is made again with the same
// token, and takes the conversation at once instead of finding it locked
// (by itself) until the lock expires.
func TestAClaimWhoseReplyWasLostIsTakenAgainAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, r := newStore(t, sessions.Options{})
	hook := &loseReplies{}
	client := redis.NewClient(&redis.Options{Addr: r.Client.(*redis.Client).Options().Addr})
	client.AddHook(hook)
	t.Cleanup(func() { client.Close() })
	s := sessions.NewRedis(client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Hour})
	const conv = "slack:T1:C1:9.0"
	accept(t, s, conv, sessions.Arrival{Item: []byte("m1")})

	hook.armed.Store(true)
	if c, err := s.Claim(ctx, conv); err == nil || c != nil {
		t.Fatalf("Claim with its reply lost = %v, %v", c, err)
	}
	hook.armed.Store(false)
	if ttl := r.Client.PTTL(ctx, r.Prefix+"conv:{"+conv+"}:lock").Val(); ttl <= 0 {
		t.Fatalf("the lost claim did not take the lock (PTTL %v): the test proves nothing", ttl)
	}
	c, err := s.Claim(ctx, conv)
	var locked *sessions.LockedError
	if errors.As(err, &locked) {
		t.Fatalf("the claim made again found its own lock held, for %v", locked.Expires)
	}
	if err != nil || c == nil || string(c.Item) != "m1" {
		t.Fatalf("Claim again = %+v, %v", c, err)
	}
	if _, err := s.Complete(ctx, c.Lock, c.Item, nil); err != nil {
		t.Fatalf("Complete = %v", err)
	}

	// Another holder's lock stays another's.
	accept(t, s, conv, sessions.Arrival{Item: []byte("m2")})
	other := claim(t, sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Hour}), conv)
	if _, err := s.Claim(ctx, conv); !errors.As(err, &locked) {
		t.Fatalf("a claim while another holds the lock = %v, want LockedError", err)
	}
	_ = other
}
