package sessions_test

import (
	"context"
	"testing"
	"time"

	"github.com/parleyhq/parley/sessions"
)

// TestAnArrivalFromThePersonAskedIsTheirAnswer: while a turn waits for
// someone's answer, their next message in the conversation goes to the
// answers (once, even when the platform delivers it twice), everyone
// else's is queued, and a click that can only be an answer is refused
// from anyone else and once the question is over.
func TestAnArrivalFromThePersonAskedIsTheirAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{HistoryTTL: time.Hour, DedupeTTL: time.Hour})
	conv := "slack:T1:C1:1.1"
	inbox := func() int64 { return r.Client.LLen(ctx, r.Prefix+"conv:{"+conv+"}:inbox").Val() }
	accept := func(a sessions.Arrival) sessions.Acceptance {
		t.Helper()
		a.Limit = 10
		got, err := s.Accept(ctx, conv, a)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	if got := accept(sessions.Arrival{Item: []byte("click"), Sender: "U1", AnswerOnly: true}); got != sessions.NotAsked {
		t.Fatalf("a click with no question open = %v", got)
	}
	if err := s.Ask(ctx, conv, "U1", time.Minute); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		a    sessions.Arrival
		want sessions.Acceptance
	}{
		{"someone else's message waits in the inbox", sessions.Arrival{Item: []byte("other"), ID: "E1", Sender: "U2"}, sessions.Queued},
		{"someone else's click is refused", sessions.Arrival{Item: []byte("click2"), Sender: "U2", AnswerOnly: true}, sessions.NotAsked},
		{"the person's message is the answer", sessions.Arrival{Item: []byte("42"), ID: "E2", Sender: "U1", RequireMark: "followed"}, sessions.Answered},
		{"its re-delivery is a duplicate", sessions.Arrival{Item: []byte("42"), ID: "E2", Sender: "U1"}, sessions.Duplicate},
		{"the person's click is an answer too", sessions.Arrival{Item: []byte("click3"), Sender: "U1", AnswerOnly: true}, sessions.Answered},
	}
	for _, c := range cases {
		if got := accept(c.a); got != c.want {
			t.Fatalf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if n := inbox(); n != 1 {
		t.Fatalf("inbox holds %d, want only the other person's message", n)
	}
	for _, want := range []string{"42", "click3"} {
		got, ok, err := s.TakeAnswer(ctx, conv)
		if err != nil || !ok || string(got) != want {
			t.Fatalf("TakeAnswer = %q, %v, %v; want %q", got, ok, err, want)
		}
	}
	if _, ok, _ := s.TakeAnswer(ctx, conv); ok {
		t.Fatal("an answer taken twice")
	}
	if err := s.EndAsk(ctx, conv); err != nil {
		t.Fatal(err)
	}
	if got := accept(sessions.Arrival{Item: []byte("later"), ID: "E3", Sender: "U1"}); got != sessions.Queued {
		t.Fatalf("after the question, the person's message = %v, want queued", got)
	}
	if got := accept(sessions.Arrival{Item: []byte("late click"), Sender: "U1", AnswerOnly: true}); got != sessions.NotAsked {
		t.Fatalf("a click after the question = %v", got)
	}
}

// TestAQuestionNobodyAnswersLeavesNothing: the wait and its answers end
// with the question's time even when the turn that asked is gone.
func TestAQuestionNobodyAnswersLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, r := newStore(t, sessions.Options{HistoryTTL: time.Hour, DedupeTTL: time.Hour})
	conv := "feishu:T:oc_1:om_1"
	if err := s.Ask(ctx, conv, "ou_1", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Accept(ctx, conv, sessions.Arrival{Item: []byte("x"), Sender: "ou_1", Limit: 10}); got != sessions.Answered {
		t.Fatalf("Accept = %v", got)
	}
	if ttl := r.Client.PTTL(ctx, r.Prefix+"conv:{"+conv+"}:answers").Val(); ttl <= 0 || ttl > 300*time.Millisecond {
		t.Fatalf("answers TTL = %v, want the question's", ttl)
	}
	r.Client.PExpire(ctx, r.Prefix+"conv:{"+conv+"}:asking", time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for r.Client.Exists(ctx, r.Prefix+"conv:{"+conv+"}:asking").Val() == 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got, _ := s.Accept(ctx, conv, sessions.Arrival{Item: []byte("y"), Sender: "ou_1", Limit: 10}); got != sessions.Queued {
		t.Fatalf("after the question expired: %v, want queued", got)
	}
}
