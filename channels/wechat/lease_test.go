package wechat

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/internal/redistest"
)

// leaseSpy watches one lease key's commands from the client's side: the
// takeover tries Redis refused (SET NX on a live key) and the renewals that
// kept the lease. The test waits for these events instead of sleeping.
type leaseSpy struct {
	key              string
	refused, renewed atomic.Int64
}

func (s *leaseSpy) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *leaseSpy) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (s *leaseSpy) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		switch c := cmd.(type) {
		case *redis.BoolCmd: // SET key token PX ttl NX
			if cmd.Name() == "set" && len(args) > 1 && args[1] == s.key && c.Err() == nil && !c.Val() {
				s.refused.Add(1)
			}
		case *redis.Cmd: // EVALSHA sha 1 key token ttl: a renewal (a release has no ttl)
			if (cmd.Name() == "evalsha" || cmd.Name() == "eval") && len(args) == 6 && args[3] == s.key {
				if n, err := c.Int(); err == nil && n == 1 {
					s.renewed.Add(1)
				}
			}
		}
		return err
	}
}

func TestLeaseIsTakenOverAfterTheHolderDies(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	// Generous on a loaded machine: a renewal may take up to a third of
	// it, and the holder only steps back after a whole TTL unrenewed.
	ttl := 2 * time.Second
	key := leaseKey(r.Prefix, "test", "bot")
	spy := &leaseSpy{key: key}
	r.Client.AddHook(spy)
	// A holder that died: its token stays until its TTL runs out, which
	// the test brings about below (PEXPIRE) once it has seen tries refused.
	if err := r.Client.Set(context.Background(), key, "dead-holder", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	l := &lease{client: r.Client, key: key, ttl: ttl, log: quietLog()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var works atomic.Int64
	started := make(chan struct{})
	ended := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.hold(ctx, func(wctx context.Context) {
			if works.Add(1) == 1 {
				close(started)
				<-wctx.Done()
				ended <- context.Cause(wctx)
				return
			}
			<-wctx.Done()
		})
	}()
	waitFor(t, "two takeover tries refused", func() bool { return spy.refused.Load() >= 2 })
	if n := works.Load(); n != 0 {
		t.Fatalf("work ran %d times while the dead holder's key was live", n)
	}
	if err := r.Client.PExpire(context.Background(), key, time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("lease never taken over")
	}
	// Renewal keeps it: after more renewals than fit in one TTL, the key
	// still holds our token and the work was never interrupted.
	base := spy.renewed.Load()
	waitFor(t, "four renewals", func() bool { return spy.renewed.Load() >= base+4 })
	if v, _ := r.Client.Get(context.Background(), key).Result(); v == "dead-holder" || v == "" {
		t.Fatalf("lease value = %q; renewal did not keep it", v)
	}
	if n := works.Load(); n != 1 {
		t.Fatalf("work ran %d times; the lease was lost while renewed", n)
	}
	// Another replica stealing the key ends the work: the next renewal
	// finds it gone.
	r.Client.Set(context.Background(), key, "thief", time.Minute)
	select {
	case err := <-ended:
		if !errors.Is(err, errLeaseLost) {
			t.Fatalf("work ended with %v, want the lease lost", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("work went on after another replica took the lease")
	}
	cancel()
	<-done
	if v, _ := r.Client.Get(context.Background(), key).Result(); v != "thief" {
		t.Fatalf("release deleted another holder's lease: %q", v)
	}
}
