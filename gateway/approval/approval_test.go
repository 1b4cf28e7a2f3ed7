package approval_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/gateway/approval"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/sessions"
)

type rig struct {
	store    *sessions.RedisStore
	approval *approval.Store
}

func newRig(t *testing.T) rig {
	t.Helper()
	r := redistest.New(t)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: 5 * time.Second})
	return rig{store: store, approval: approval.New(r.Client, store.Key)}
}

// pause takes conv's lock and pauses a turn on it for timeout.
func (rg rig) pause(t *testing.T, conv string, timeout time.Duration) approval.Request {
	t.Helper()
	ctx := context.Background()
	lock, err := rg.store.TryLock(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	req := approval.NewRequest(time.Now(), timeout)
	req.Conversation, req.Item, req.Tool, req.Args, req.Requester = conv, "item1", "save_skill_reference", `{"name":"x"}`, "U1"
	if err := rg.approval.Pause(ctx, lock.Token(), req); err != nil {
		t.Fatal(err)
	}
	lock.Detach()
	return req
}

// TestPauseHandsTheLockToTheApproval: while an approval is pending its
// conversation stays locked, so nothing else of it runs; a holder that
// lost its lock cannot pause.
func TestPauseHandsTheLockToTheApproval(t *testing.T) {
	rg := newRig(t)
	ctx := context.Background()
	req := rg.pause(t, "slack:T:C:1", time.Minute)
	if _, err := rg.store.TryLock(ctx, "slack:T:C:1"); !errors.Is(err, sessions.ErrLocked) {
		t.Fatalf("TryLock while pending = %v, want ErrLocked", err)
	}
	rec, err := rg.approval.Get(ctx, "slack:T:C:1")
	if err != nil || rec == nil || rec.State != approval.Pending || rec.ID != req.ID || rec.Args != req.Args {
		t.Fatalf("Get = %+v, %v", rec, err)
	}

	// A lock that is no longer the holder's: nothing is written.
	other := approval.NewRequest(time.Now(), time.Minute)
	other.Conversation = "slack:T:C:2"
	if err := rg.approval.Pause(ctx, "not-the-token", other); !errors.Is(err, approval.ErrLockLost) {
		t.Fatalf("Pause without the lock = %v, want ErrLockLost", err)
	}
	if rec, _ := rg.approval.Get(ctx, "slack:T:C:2"); rec != nil {
		t.Fatalf("a failed pause left %+v", rec)
	}
}

// TestOneDecisionWins: many approvers deciding at once (double clicks,
// re-delivered interactions, two replicas) — exactly one decides, the
// others learn who did, and the conversation is freed once.
func TestOneDecisionWins(t *testing.T) {
	rg := newRig(t)
	ctx := context.Background()
	const conv = "slack:T:C:1"
	req := rg.pause(t, conv, time.Minute)

	const n = 16
	var wg sync.WaitGroup
	outcomes := make([]approval.Outcome, n)
	records := make([]*approval.Record, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			state := approval.Approved
			if i%2 == 1 {
				state = approval.Denied
			}
			match := req.Code
			if i%3 == 0 {
				match = req.ID
			}
			outcomes[i], records[i], errs[i] = rg.approval.Decide(ctx, conv, match, state, "U"+string(rune('A'+i)), "", time.Now(), nil)
		})
	}
	wg.Wait()
	winner := -1
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("decide %d: %v", i, errs[i])
		}
		if outcomes[i] == approval.Decided {
			if winner >= 0 {
				t.Fatalf("both %d and %d decided", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("nobody decided")
	}
	for i := range n {
		if i != winner && (outcomes[i] != approval.Already || records[i].By != records[winner].By || records[i].State != records[winner].State) {
			t.Errorf("decide %d: %v %+v; want Already by %s", i, outcomes[i], records[i], records[winner].By)
		}
	}
	// The lock is free for the turn to resume.
	lock, err := rg.store.TryLock(ctx, conv)
	if err != nil {
		t.Fatalf("after the decision TryLock = %v", err)
	}
	lock.Release(ctx)
	rec, _ := rg.approval.Get(ctx, conv)
	if rec.State != records[winner].State || rec.At.IsZero() {
		t.Fatalf("stored %+v", rec)
	}
}

// TestBadDecisionsChangeNothing: a wrong code, another conversation's
// code, no approval at all, a decision that is not one.
func TestBadDecisionsChangeNothing(t *testing.T) {
	rg := newRig(t)
	ctx := context.Background()
	a := rg.pause(t, "slack:T:C:1", time.Minute)
	b := rg.pause(t, "slack:T:C:2", time.Minute)
	for _, tt := range []struct{ conv, match string }{
		{"slack:T:C:1", "WRONG1"},
		{"slack:T:C:1", b.Code},
		{"slack:T:C:1", b.ID},
		{"slack:T:C:3", a.Code},
	} {
		if _, _, err := rg.approval.Decide(ctx, tt.conv, tt.match, approval.Approved, "U1", "", time.Now(), nil); !errors.Is(err, approval.ErrUnknown) {
			t.Errorf("Decide(%s, %s) = %v, want ErrUnknown", tt.conv, tt.match, err)
		}
	}
	if _, _, err := rg.approval.Decide(ctx, "slack:T:C:1", a.Code, approval.Expired, "U1", "", time.Now(), nil); err == nil {
		t.Error("Decide accepted expired as a decision")
	}
	for _, conv := range []string{"slack:T:C:1", "slack:T:C:2"} {
		if rec, _ := rg.approval.Get(ctx, conv); rec.State != approval.Pending {
			t.Errorf("%s: %s after bad decisions", conv, rec.State)
		}
	}
	// A typed code need not be upper-case.
	if out, _, err := rg.approval.Decide(ctx, "slack:T:C:1", " "+strings.ToLower(a.Code)+" ", approval.Denied, "U1", "", time.Now(), nil); err != nil || out != approval.Decided {
		t.Fatalf("lower-case code: %v %v", out, err)
	}
}

// TestExpiry: once the approval's time runs out, a decision is too late,
// the conversation can be claimed, and its claimant marks it expired; a
// decision after that learns it expired.
func TestExpiry(t *testing.T) {
	rg := newRig(t)
	ctx := context.Background()
	const conv = "slack:T:C:1"
	req := rg.pause(t, conv, 300*time.Millisecond)
	var lock *sessions.Lock
	deadline := time.Now().Add(20 * time.Second)
	for {
		l, err := rg.store.TryLock(ctx, conv)
		if err == nil {
			lock = l
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the approval's lock never expired")
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer lock.Release(ctx)
	if out, _, err := rg.approval.Decide(ctx, conv, req.Code, approval.Approved, "U1", "", time.Now(), nil); err != nil || out != approval.TooLate {
		t.Fatalf("late decision: %v %v, want TooLate", out, err)
	}
	if ok, err := rg.approval.Expire(ctx, conv, req.ID, time.Now()); !ok || err != nil {
		t.Fatalf("Expire = %v %v", ok, err)
	}
	if ok, _ := rg.approval.Expire(ctx, conv, req.ID, time.Now()); ok {
		t.Fatal("expired twice")
	}
	out, rec, err := rg.approval.Decide(ctx, conv, req.Code, approval.Approved, "U1", "", time.Now(), nil)
	if err != nil || out != approval.Already || rec.State != approval.Expired {
		t.Fatalf("decision after expiry: %v %+v %v", out, rec, err)
	}
	if err := rg.approval.Drop(ctx, conv, "another"); err != nil {
		t.Fatal(err)
	}
	if rec, _ := rg.approval.Get(ctx, conv); rec == nil {
		t.Fatal("Drop of another id deleted the record")
	}
	if err := rg.approval.Drop(ctx, conv, req.ID); err != nil {
		t.Fatal(err)
	}
	if rec, _ := rg.approval.Get(ctx, conv); rec != nil {
		t.Fatal("Drop left the record")
	}
}

// TestDroppedApprovalStillAnswers: a click that arrives after the turn
// is written (a double click, a platform's re-delivery, another replica)
// hears who decided instead of "no such approval", and changes nothing;
// the finished record no longer holds the paused turn, and is not the
// conversation's approval.
func TestDroppedApprovalStillAnswers(t *testing.T) {
	rg := newRig(t)
	ctx := context.Background()
	conv := "slack:T:C:done"
	req := rg.pause(t, conv, time.Minute)
	if out, _, err := rg.approval.Decide(ctx, conv, req.ID, approval.Approved, "U2", "boss", time.Now(), nil); err != nil || out != approval.Decided {
		t.Fatalf("Decide = %v %v", out, err)
	}
	if err := rg.approval.Drop(ctx, conv, req.ID); err != nil {
		t.Fatal(err)
	}
	if rec, err := rg.approval.Get(ctx, conv); rec != nil || err != nil {
		t.Fatalf("Get after Drop = %+v %v, want none", rec, err)
	}
	if rec, err := rg.approval.Finished(ctx, conv); err != nil || rec == nil || rec.ID != req.ID || rec.State != approval.Approved || rec.Decider() != "boss" {
		t.Fatalf("Finished after Drop = %+v %v, want the approved record", rec, err)
	}
	for _, match := range []string{req.ID, strings.ToLower(req.Code)} {
		out, rec, err := rg.approval.Decide(ctx, conv, match, approval.Denied, "U3", "late", time.Now(), nil)
		if err != nil || out != approval.Already || rec.State != approval.Approved || rec.Decider() != "boss" || rec.Tool != req.Tool {
			t.Fatalf("late Decide(%s) = %v %+v %v, want Already approved by boss", match, out, rec, err)
		}
		if len(rec.Turn) != 0 && string(rec.Turn) != "null" {
			t.Fatalf("the finished record kept the paused turn: %s", rec.Turn)
		}
	}
	// Unnamed (/cancel) or another approval's id: nothing to decide.
	for _, match := range []string{"", "NOSUCH"} {
		if _, _, err := rg.approval.Decide(ctx, conv, match, approval.Cancelled, "U1", "", time.Now(), nil); !errors.Is(err, approval.ErrUnknown) {
			t.Fatalf("Decide(%q) after Drop = %v, want ErrUnknown", match, err)
		}
	}
	// A new approval of the conversation is decided as usual.
	next := rg.pause(t, conv, time.Minute)
	if out, _, err := rg.approval.Decide(ctx, conv, next.Code, approval.Denied, "U2", "boss", time.Now(), nil); err != nil || out != approval.Decided {
		t.Fatalf("Decide of the next approval = %v %v", out, err)
	}
}

// TestPromptReference: the posted prompt's reference is kept with its
// approval and handed back with the decision, to the decider and to those
// who come after; another approval's reference is not stored over it.
func TestPromptReference(t *testing.T) {
	rg := newRig(t)
	ctx := context.Background()
	const conv = "slack:T:C:2"
	req := rg.pause(t, conv, time.Minute)
	ref := map[string]string{"channel": "C", "ts": "1.2"}
	if err := rg.approval.SetPrompt(ctx, conv, "NOT-THIS-ONE", map[string]string{"ts": "9"}); err != nil {
		t.Fatal(err)
	}
	if rec, _ := rg.approval.Get(ctx, conv); rec.Prompt != nil {
		t.Fatalf("another approval's prompt was stored: %v", rec.Prompt)
	}
	if err := rg.approval.SetPrompt(ctx, conv, req.ID, ref); err != nil {
		t.Fatal(err)
	}
	out, rec, err := rg.approval.Decide(ctx, conv, req.ID, approval.Approved, "U1", "ann", time.Now(), nil)
	if err != nil || out != approval.Decided || rec.Prompt["ts"] != "1.2" {
		t.Fatalf("Decide = %v %+v %v", out, rec, err)
	}
	out, rec, err = rg.approval.Decide(ctx, conv, req.Code, approval.Denied, "U2", "", time.Now(), nil)
	if err != nil || out != approval.Already || rec.Prompt["channel"] != "C" || rec.Decider() != "ann" {
		t.Fatalf("second Decide = %v %+v %v", out, rec, err)
	}
}
