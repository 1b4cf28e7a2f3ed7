package mcp

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/mcp/mcptest"
	"github.com/parleyhq/parley/retry"
)

// A replica that has waited for a sign-in long enough for its backoff to
// reach an hour still uses the sign-in within a poll of its being saved
// (by `parley mcp login` in another process), without a restart; until
// then its polls find nothing and it stays down.
func TestOAuthSignInReachesAWaitingReplica(t *testing.T) {
	as := newAuthServer(t)
	p := mcptest.NewProtectedServer(t, as, "gh")
	cfg := oauthConfig(p, preRegistered)
	store := redisTokens(t)
	f := newFixture(t, cfg, Options{Tokens: store, Getenv: getenv})
	var polls atomic.Int64
	f.m.timing.backoff = retry.Backoff{Min: time.Hour, Max: time.Hour}
	f.m.timing.signInPoll = 10 * time.Millisecond
	f.m.timing.sleep = func(ctx context.Context, d time.Duration) bool {
		polls.Add(1)
		return retry.Sleep(ctx, d)
	}
	f.start(t)
	waitFor(t, "polls that find no sign-in", func() bool { return polls.Load() >= 5 })
	if st := f.state(t, "gh"); st.Up || st.Connects != 0 || st.SignIn == "" {
		t.Fatalf("without a sign-in: up=%v connects=%d sign-in=%q", st.Up, st.Connects, st.SignIn)
	}
	if _, err := login(t, cfg, store); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the waiting replica to connect with the saved sign-in", func() bool { return f.state(t, "gh").Up })
	got, err := f.call(t, context.Background(), "gh__"+mcptest.ReadTool, `{"key":"k"}`)
	if err != nil || got != "gh has k" {
		t.Fatalf("%q, %v", got, err)
	}
	if st := f.state(t, "gh"); st.SignIn != "" {
		t.Fatalf("connected, yet the state says %q", st.SignIn)
	}
}
