package quota_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/parleyhq/parley/gateway/quota"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// admitted counts how many of n checks of s under l go ahead, and
// returns the verdicts of the others.
func admitted(t *testing.T, q *quota.Quotas, s quota.Subject, l quota.Limits, n int) (int, []quota.Verdict) {
	t.Helper()
	ok := 0
	var refused []quota.Verdict
	for range n {
		v, err := q.Check(context.Background(), s, l)
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if v.Refused == "" {
			ok++
		} else {
			refused = append(refused, v)
		}
	}
	return ok, refused
}

// checkRates runs the rate rules on one client: a burst of N is admitted,
// then refused with a wait under one interval (a minute/N, long enough
// that a slow machine does not see the next one released), and the first
// refusal alone asks for a notice.
func checkRates(t *testing.T, client redis.UniversalClient, prefix string) {
	q := quota.New(client, prefix)
	u1 := quota.Subject{Channel: "slack", Workspace: "T1", User: "U1"}
	l := quota.Limits{UserPerMinute: 6, WorkspacePerMinute: 10}
	ok, refused := admitted(t, q, u1, l, 10)
	if ok != 6 {
		t.Errorf("admitted %d of 10 at 6 a minute, want 6 (the burst)", ok)
	}
	for i, v := range refused {
		if v.Refused != quota.User || v.Notify != (i == 0) {
			t.Errorf("refusal %d = %+v, want a user refusal, notify only the first", i, v)
		}
		if v.RetryAfter <= 0 || v.RetryAfter > 10*time.Second {
			t.Errorf("refusal %d: RetryAfter = %v, want within one interval (10s)", i, v.RetryAfter)
		}
	}
	// U1's refusals did not count against the workspace: 6 of 10 are
	// used, so 4 more of other users go ahead.
	var total int
	for i := range 5 {
		n, _ := admitted(t, q, quota.Subject{Channel: "slack", Workspace: "T1", User: fmt.Sprintf("V%d", i)}, l, 2)
		total += n
	}
	if total != 4 {
		t.Errorf("other users admitted %d, want 4 (10 a minute for the workspace, 6 already used by U1)", total)
	}
	// Nothing set: no Redis call at all, always admitted.
	if n, _ := admitted(t, q, u1, quota.Limits{}, 5); n != 5 {
		t.Errorf("without limits admitted %d of 5", n)
	}
}

func TestRates(t *testing.T) {
	r := redistest.New(t)
	checkRates(t, r.Client, r.Prefix)
}

// TestRatesOnACluster: one check is one script whose keys share a slot,
// so it runs on Redis Cluster.
func TestRatesOnACluster(t *testing.T) {
	c := redistest.NewCluster(t)
	checkRates(t, c.Client, c.Prefix)
}

// TestRatesOnTheEmbeddedStore: the in-memory store (miniredis) runs the
// script too.
func TestRatesOnTheEmbeddedStore(t *testing.T) {
	srv := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer client.Close()
	checkRates(t, client, "parley:")
}

func TestBudget(t *testing.T) {
	r := redistest.New(t)
	q := quota.New(r.Client, r.Prefix)
	ctx := context.Background()
	s := quota.Subject{Channel: "feishu", Workspace: "tenant", User: "ou_1"}
	l := quota.Limits{TokensPerUserDay: 1000}
	for _, spend := range []int64{400, 599} {
		if v, err := q.Check(ctx, s, l); err != nil || v.Refused != "" {
			t.Fatalf("Check under budget = %+v, %v", v, err)
		}
		if _, err := q.Spend(ctx, s, spend); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := q.Check(ctx, s, l); v.Refused != "" {
		t.Fatalf("999 of 1000 tokens: refused %+v", v)
	}
	total, err := q.Spend(ctx, s, 1)
	if err != nil || total != 1000 {
		t.Fatalf("Spend = %d, %v; want 1000", total, err)
	}
	v, err := q.Check(ctx, s, l)
	if err != nil || v.Refused != quota.Budget || !v.Notify {
		t.Fatalf("at the budget: %+v, %v; want a budget refusal with a notice", v, err)
	}
	if v, _ := q.Check(ctx, s, l); v.Refused != quota.Budget || v.Notify {
		t.Fatalf("again: %+v; want a budget refusal without a second notice", v)
	}
	// The count expires on its own: it is a day's.
	ttl := r.Client.TTL(ctx, r.Prefix+"quota:{feishu:tenant}:tokens:"+time.Now().UTC().Format("2006-01-02")+":ou_1").Val()
	if ttl <= 24*time.Hour || ttl > 48*time.Hour {
		t.Errorf("token count TTL = %v, want a day and a bit", ttl)
	}
	// A negative usage from a broken server counts nothing.
	if total, _ := q.Spend(ctx, s, -500); total != 1000 {
		t.Errorf("after a negative spend total = %d, want 1000", total)
	}
}
