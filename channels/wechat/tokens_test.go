package wechat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/redistest"
)

// TestILinkContextTokensDropIdleUsers: the context-token hash of a bot
// keeps only users heard from within the token's life; a user idle past it
// is dropped when another user writes, so the hash does not grow with
// every user the bot ever had while one of them stays active.
func TestILinkContextTokensDropIdleUsers(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	clock := time.Unix(1_800_000_000, 0)
	tok := &contextTokens{client: r.Client, prefix: r.Prefix, now: func() time.Time { return clock }}
	for i := range 50 {
		if err := tok.record(ctx, "bot1", fmt.Sprintf("u%d", i), "tok"); err != nil {
			t.Fatal(err)
		}
	}
	// One user keeps writing every day; the others go quiet.
	for day := 1; day <= 3; day++ {
		clock = clock.Add(24 * time.Hour)
		if err := tok.record(ctx, "bot1", "active", fmt.Sprintf("tok-%d", day)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := r.Client.HLen(ctx, tok.key("bot1")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 { // t:, a: and n: of the active user
		t.Errorf("the hash holds %d fields; want 3 (only the active user)", n)
	}
	if token, _, err := tok.latest(ctx, "bot1", "active"); err != nil || token != "tok-3" {
		t.Errorf("active user's token = %q, %v", token, err)
	}
	if token, _, _ := tok.latest(ctx, "bot1", "u7"); token != "" {
		t.Errorf("an idle user's token is still kept: %q", token)
	}
	if z, _ := r.Client.ZCard(ctx, tok.seenKey("bot1")).Result(); z != 1 {
		t.Errorf("the index holds %d users; want 1", z)
	}
}
