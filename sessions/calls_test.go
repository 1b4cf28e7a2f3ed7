package sessions_test

import (
	"context"
	"errors"
	"testing"

	"github.com/parleyhq/parley/sessions"
)

// TestWriteToolsRunAtMostOncePerCall_Ledger (issue 12, item 8): a call is
// claimed by one attempt only; a second attempt learns it is unfinished
// until the first records its result, then gets that result; a claim that
// is not the record's cannot record; calls and conversations are apart.
func TestWriteToolsRunAtMostOncePerCall_Ledger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, sessions.Options{})
	const conv = "slack:T:C:1"
	first, err := s.BeginCall(ctx, conv, "k1")
	if err != nil || first.State != sessions.CallClaimed || first.Claim == "" {
		t.Fatalf("first BeginCall = %+v, %v; want claimed", first, err)
	}
	again, err := s.BeginCall(ctx, conv, "k1")
	if err != nil || again.State != sessions.CallUnfinished {
		t.Fatalf("BeginCall while claimed = %+v, %v; want unfinished", again, err)
	}
	if err := s.EndCall(ctx, conv, "k1", "claimed:forged", []byte("x")); !errors.Is(err, sessions.ErrCallNotClaimed) {
		t.Fatalf("EndCall with another claim = %v; want ErrCallNotClaimed", err)
	}
	if err := s.EndCall(ctx, conv, "k1", first.Claim, []byte(`{"content":"saved"}`)); err != nil {
		t.Fatal(err)
	}
	done, err := s.BeginCall(ctx, conv, "k1")
	if err != nil || done.State != sessions.CallDone || string(done.Result) != `{"content":"saved"}` {
		t.Fatalf("BeginCall after EndCall = %+v (%s), %v; want done with the result", done, done.Result, err)
	}
	if err := s.EndCall(ctx, conv, "k1", first.Claim, []byte("overwrite")); !errors.Is(err, sessions.ErrCallNotClaimed) {
		t.Fatalf("a second EndCall = %v; want ErrCallNotClaimed", err)
	}
	for _, other := range []struct{ conv, key string }{{conv, "k2"}, {"slack:T:C:2", "k1"}} {
		if r, err := s.BeginCall(ctx, other.conv, other.key); err != nil || r.State != sessions.CallClaimed {
			t.Fatalf("BeginCall(%q, %q) = %+v, %v; want a fresh claim", other.conv, other.key, r, err)
		}
	}
}
