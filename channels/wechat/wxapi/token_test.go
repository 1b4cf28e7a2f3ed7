package wxapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/redistest"
)

// fetcher is a platform's token endpoint: it counts the fetches and how
// many overlap, and takes its time so that they would.
type fetcher struct {
	calls, inFlight, maxInFlight atomic.Int32
	delay                        time.Duration
	expiresIn                    time.Duration
	fail                         atomic.Value // error
}

func (f *fetcher) fetch(ctx context.Context) (string, time.Duration, error) {
	n := f.calls.Add(1)
	cur := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		old := f.maxInFlight.Load()
		if cur <= old || f.maxInFlight.CompareAndSwap(old, cur) {
			break
		}
	}
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		return "", 0, ctx.Err()
	}
	if err, _ := f.fail.Load().(error); err != nil {
		return "", 0, err
	}
	exp := f.expiresIn
	if exp == 0 {
		exp = 2 * time.Hour
	}
	return fmt.Sprintf("token-%d", n), exp, nil
}

// Three replicas, thirty concurrent callers, one fetch.
func TestOneFetchAcrossReplicas(t *testing.T) {
	r := redistest.New(t)
	f := &fetcher{delay: 100 * time.Millisecond}
	var replicas []*Tokens
	for range 3 {
		replicas = append(replicas, NewTokens(r.Client, r.Prefix, "acct", f.fetch, TokenOptions{Poll: 5 * time.Millisecond}, nil))
	}
	var wg sync.WaitGroup
	tokens := make([]string, 30)
	for i := range tokens {
		wg.Go(func() {
			tok, err := replicas[i%3].Get(context.Background())
			if err != nil {
				t.Error(err)
			}
			tokens[i] = tok
		})
	}
	wg.Wait()
	if n, m := f.calls.Load(), f.maxInFlight.Load(); n != 1 || m != 1 {
		t.Fatalf("%d fetches, %d at once; want one", n, m)
	}
	for _, tok := range tokens {
		if tok != "token-1" {
			t.Fatalf("tokens %v", tokens)
		}
	}
	// Stored a margin short of its life.
	ttl := r.Client.PTTL(context.Background(), replicas[0].key).Val()
	if ttl <= 0 || ttl > 2*time.Hour-DefaultMargin {
		t.Fatalf("stored for %v", ttl)
	}
}

// A rejected token is dropped only if it is still the stored one, and
// forced refreshes are limited across replicas.
func TestInvalidate(t *testing.T) {
	r := redistest.New(t)
	f := &fetcher{}
	a := NewTokens(r.Client, r.Prefix, "acct", f.fetch, TokenOptions{ForceInterval: time.Hour}, nil)
	b := NewTokens(r.Client, r.Prefix, "acct", f.fetch, TokenOptions{ForceInterval: time.Hour}, nil)
	ctx := context.Background()
	first, err := a.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Invalidate(ctx, first); err != nil {
		t.Fatal(err)
	}
	second, err := b.Get(ctx)
	if err != nil || second == first {
		t.Fatalf("after invalidation: %q, %v", second, err)
	}
	// A replica that still had the first token reports it late: the new
	// one stays.
	if _, err := b.Invalidate(ctx, first); err != nil {
		t.Fatalf("a stale report: %v", err)
	}
	if got, _ := a.Get(ctx); got != second {
		t.Fatalf("a stale report replaced the token: %q", got)
	}
	// A second forced refresh within the interval is refused, with the
	// wait until the next is allowed.
	wait, err := a.Invalidate(ctx, second)
	if !errors.Is(err, ErrForceLimited) || wait <= 0 || wait > time.Hour {
		t.Fatalf("second forced refresh: %v, wait %v", err, wait)
	}
	if got, _ := a.Get(ctx); got != second || f.calls.Load() != 2 {
		t.Fatalf("token %q after %d fetches", got, f.calls.Load())
	}
}

// A failed fetch is remembered briefly, so that every other caller does
// not ask the platform again with the same refused secret.
func TestFailedFetchIsRemembered(t *testing.T) {
	r := redistest.New(t)
	f := &fetcher{}
	f.fail.Store(errors.New("errcode 40001: invalid credential"))
	tokens := NewTokens(r.Client, r.Prefix, "acct", f.fetch, TokenOptions{FailBackoff: time.Hour}, nil)
	for range 5 {
		if _, err := tokens.Get(context.Background()); !errors.Is(err, ErrRefreshFailed) {
			t.Fatalf("Get = %v", err)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d fetches with a refused secret", n)
	}
}

// Keep fetches again when the stored token runs out, on one replica.
func TestKeepRefreshesBeforeExpiry(t *testing.T) {
	r := redistest.New(t)
	f := &fetcher{expiresIn: 3 * time.Second}
	opts := TokenOptions{Margin: 2500 * time.Millisecond, Poll: 5 * time.Millisecond} // stored for 1.5 s
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range 2 {
		tokens := NewTokens(r.Client, r.Prefix, "acct", f.fetch, opts, nil)
		wg.Go(func() { tokens.Keep(ctx) })
	}
	deadline := time.Now().Add(20 * time.Second)
	for f.calls.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if n := f.calls.Load(); n < 3 {
		t.Fatalf("%d fetches; Keep did not refresh", n)
	}
	if m := f.maxInFlight.Load(); m != 1 {
		t.Fatalf("%d fetches at once", m)
	}
}
