package sessions_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/sessions"
)

// TestEveryScriptRunsOnARedisCluster: accept, claim and complete touch
// only keys of one conversation's hash slot (a script whose keys span
// slots fails with CROSSSLOT), over conversations spread across every
// master; the sweep finds queues on every master.
func TestEveryScriptRunsOnARedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t)
	s := sessions.NewRedis(c.Client, sessions.Options{Prefix: c.Prefix})
	ctx := context.Background()
	const n = 30
	convs := make([]string, n)
	for i := range convs {
		convs[i] = fmt.Sprintf("slack:T1:C%d:17000.%d", i, i)
		got, err := s.Accept(ctx, convs[i], sessions.Arrival{Item: []byte("hello"), Limit: 10, ID: fmt.Sprintf("Ev%d", i), Marks: []string{"followed"}})
		if err != nil || got != sessions.Queued {
			t.Fatalf("Accept on the cluster = %v, %v", got, err)
		}
		got, err = s.Accept(ctx, convs[i], sessions.Arrival{Item: []byte("follow-up"), Limit: 10, ID: fmt.Sprintf("Ev%d-2", i), RequireMark: "followed"})
		if err != nil || got != sessions.Queued {
			t.Fatalf("Accept of a follow-up on the cluster = %v, %v", got, err)
		}
		if got, err := s.Accept(ctx, convs[i], sessions.Arrival{Item: []byte("hello"), Limit: 10, ID: fmt.Sprintf("Ev%d", i)}); err != nil || got != sessions.Duplicate {
			t.Fatalf("re-delivery on the cluster = %v, %v; want Duplicate", got, err)
		}
	}
	orphans, err := s.Orphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(orphans)
	want := slices.Clone(convs)
	slices.Sort(want)
	if !slices.Equal(orphans, want) {
		t.Fatalf("Orphans found %d of %d queues across the masters", len(orphans), n)
	}
	masters := map[string]bool{}
	for _, conv := range convs {
		cl, err := s.Claim(ctx, conv)
		if err != nil || cl == nil || string(cl.Item) != "hello" {
			t.Fatalf("Claim on the cluster = %+v, %v", cl, err)
		}
		if _, err := s.Complete(ctx, cl.Lock, cl.Item, []sessions.Message{user("hello"), {Role: "assistant", Content: "hi"}}); err != nil {
			t.Fatalf("Complete on the cluster: %v", err)
		}
		cl, err = s.Claim(ctx, conv)
		if err != nil || cl == nil || cl.History.Len() != 2 || string(cl.Item) != "follow-up" {
			t.Fatalf("second Claim on the cluster = %+v, %v", cl, err)
		}
		if _, err := s.Complete(ctx, cl.Lock, cl.Item, nil); err != nil {
			t.Fatal(err)
		}
		node, err := c.Client.MasterForKey(ctx, c.Prefix+"conv:{"+conv+"}:history")
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
	}
	if len(masters) < 2 {
		t.Fatalf("the conversations landed on %d master(s); the test needs them spread", len(masters))
	}
}
