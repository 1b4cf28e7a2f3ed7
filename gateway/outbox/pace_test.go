package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/gateway/outbox"
	"github.com/parleyhq/parley/internal/redistest"
)

// slackPaced is fastConfig at Slack's own pace (one post a second per
// channel; newReplica's adapter takes no burst).
func slackPaced() outbox.Config {
	cfg := fastConfig()
	cfg.Pace = nil
	return cfg
}

// busiestSecond is the most posts the fake received in any window of d
// (from each post's receive time to d later).
func busiestSecond(posts []slacktest.Post, d time.Duration) int {
	most := 0
	for _, p := range posts {
		n := 0
		for _, q := range posts {
			if !q.At.Before(p.At) && q.At.Sub(p.At) < d {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// deliverAll has each replica deliver its reply at once, and waits.
func deliverAll(t *testing.T, reps []*replica, m channels.Message, replies []channels.Reply) {
	t.Helper()
	var wg sync.WaitGroup
	for i, rp := range reps {
		wg.Go(func() {
			if err := rp.o.Deliver(context.Background(), rp.slack, m, replies[i]); err != nil {
				t.Errorf("Deliver: %v", err)
			}
		})
	}
	wg.Wait()
}

// TestTwoReplicasShareAChatsPace: two replicas answer in one Slack
// channel at once, each with a reply of three parts; Slack's budget of
// about one post a second holds for the two together, measured from the
// fake's receive times. Another channel is not held up by it.
func TestTwoReplicasShareAChatsPace(t *testing.T) {
	t.Parallel()
	r, fake := redistest.New(t), slacktest.New(t)
	reps := []*replica{newReplica(t, r, fake, slackPaced()), newReplica(t, r, fake, slackPaced())}
	first, _ := longReply(3)
	second := channels.Reply{Text: first.Text + "\n\n" + "z"}
	deliverAll(t, reps, thread(), []channels.Reply{first, second})
	posts := fake.Posts()
	if len(posts) != 6 {
		t.Fatalf("%d posts, want 6", len(posts))
	}
	// The pace allows one a second; two in a second leaves room for a
	// slow scheduler without letting a burst (six at once) through.
	if n := busiestSecond(posts, time.Second); n > 2 {
		t.Errorf("%d posts within one second in one channel; the two replicas burst past Slack's pace", n)
	}
	other := thread()
	other.Chat = "C2"
	before := len(fake.Posts())
	if err := reps[0].o.Deliver(context.Background(), reps[0].slack, other, channels.Reply{Text: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	if len(fake.Posts()) != before+1 {
		t.Error("a post to another channel was not made")
	}
}

// TestRetryAfterHoldsTheChatForEveryReplica: Slack answers the first post
// 429 with Retry-After 2; no post of either replica reaches that channel
// before the wait is over, also the one that had already reserved its
// slot.
func TestRetryAfterHoldsTheChatForEveryReplica(t *testing.T) {
	t.Parallel()
	r, fake := redistest.New(t), slacktest.New(t)
	reps := []*replica{newReplica(t, r, fake, slackPaced()), newReplica(t, r, fake, slackPaced())}
	fake.Fail("chat.postMessage", slacktest.Failure{Status: 429, RetryAfter: "2"})
	start := time.Now()
	deliverAll(t, reps, thread(), []channels.Reply{{Text: "one"}, {Text: "two"}})
	posts := fake.Posts()
	if len(posts) != 2 {
		t.Fatalf("%d posts, want 2 (each reply once)", len(posts))
	}
	// The 429 came after start, so the wait ended at least 2 s after it.
	for _, p := range posts {
		if p.At.Sub(start) < 2*time.Second {
			t.Errorf("%q posted %v after the start, inside the 2 s Slack asked to wait", p.Text, p.At.Sub(start))
		}
	}
	if n := fake.Count("chat.postMessage"); n != 3 {
		t.Errorf("%d calls, want 3 (the 429 and one post of each reply)", n)
	}
}

// TestSplitAnswerIsPacedNotBurst: one replica's long answer goes out at
// the platform's pace.
func TestSplitAnswerIsPacedNotBurst(t *testing.T) {
	t.Parallel()
	r, fake := redistest.New(t), slacktest.New(t)
	rp := newReplica(t, r, fake, slackPaced())
	reply, parts := longReply(3)
	if err := rp.o.Deliver(context.Background(), rp.slack, thread(), reply); err != nil {
		t.Fatal(err)
	}
	samePosts(t, fake, parts)
	if n := busiestSecond(fake.Posts(), 500*time.Millisecond); n > 1 {
		t.Errorf("%d parts within half a second; a split answer must be paced at one a second", n)
	}
}

// TestAReservedSlotKeepsThePace: a reply whose first post's slot was
// reserved ahead, in a pipeline of its own (as the turn's completion
// carries it), shares the chat's pace with another replica's reply, and
// its later parts take slots of their own.
func TestAReservedSlotKeepsThePace(t *testing.T) {
	t.Parallel()
	r, fake := redistest.New(t), slacktest.New(t)
	reps := []*replica{newReplica(t, r, fake, slackPaced()), newReplica(t, r, fake, slackPaced())}
	// A post elsewhere loads the pacing script into this new Redis, as
	// any earlier post of a replica has.
	elsewhere := thread()
	elsewhere.Chat = "C9"
	if err := reps[0].o.Deliver(context.Background(), reps[0].slack, elsewhere, channels.Reply{Text: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	m := thread()
	pipe := r.Client.Pipeline()
	slot := reps[0].o.Reserve(context.Background(), pipe, reps[0].slack, m)
	if _, err := pipe.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	first, _ := longReply(2)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := reps[0].o.DeliverReserved(context.Background(), reps[0].slack, m, first, slot); err != nil {
			t.Errorf("DeliverReserved: %v", err)
		}
	})
	wg.Go(func() {
		if err := reps[1].o.Deliver(context.Background(), reps[1].slack, m, channels.Reply{Text: "the other replica's"}); err != nil {
			t.Errorf("Deliver: %v", err)
		}
	})
	wg.Wait()
	posts := fake.Posts()[1:]
	if len(posts) != 3 {
		t.Fatalf("%d posts in the channel, want 3", len(posts))
	}
	if n := busiestSecond(posts, time.Second); n > 2 {
		t.Errorf("%d posts within one second in one channel; the reserved slot let a burst past Slack's pace", n)
	}
}

// TestASlotThatWasNotReservedIsTakenAtThePost: a slot whose pipeline
// never ran (its completion failed first) is reserved again when the
// reply is posted, and the reply goes out at the pace.
func TestASlotThatWasNotReservedIsTakenAtThePost(t *testing.T) {
	t.Parallel()
	r, fake := redistest.New(t), slacktest.New(t)
	rp := newReplica(t, r, fake, slackPaced())
	m := thread()
	if err := rp.o.Deliver(context.Background(), rp.slack, m, channels.Reply{Text: "first"}); err != nil {
		t.Fatal(err)
	}
	slot := rp.o.Reserve(context.Background(), r.Client.Pipeline(), rp.slack, m) // never run
	if err := rp.o.DeliverReserved(context.Background(), rp.slack, m, channels.Reply{Text: "second"}, slot); err != nil {
		t.Fatal(err)
	}
	samePosts(t, fake, []string{"first", "second"})
	if n := busiestSecond(fake.Posts(), 500*time.Millisecond); n > 1 {
		t.Errorf("%d posts within half a second; the post without its reserved slot was not paced", n)
	}
}

// TestAQuietChatTakesABurstFromEveryReplica: a thread's quick follow-ups
// go out at once, up to the platform's burst, whichever replica answers
// them; the post after the burst waits for the rate. The rate is one an
// hour, so the burst's posts cannot have waited for a slot and the one
// after it cannot be posted before its context ends.
func TestAQuietChatTakesABurstFromEveryReplica(t *testing.T) {
	t.Parallel()
	r, fake := redistest.New(t), slacktest.New(t)
	cfg := fastConfig()
	cfg.Pace = map[string]channels.Pace{slack.Name: {Every: time.Hour, Burst: 3}}
	reps := []*replica{newReplica(t, r, fake, cfg), newReplica(t, r, fake, cfg)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		if err := reps[i%2].o.Deliver(ctx, reps[i%2].slack, thread(), channels.Reply{Text: fmt.Sprint("follow-up ", i+1)}); err != nil {
			t.Fatalf("follow-up %d: %v", i+1, err)
		}
	}
	if n := len(fake.Posts()); n != 3 {
		t.Fatalf("%d posts after a burst of three follow-ups; want each posted at once", n)
	}
	held, stop := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer stop()
	_ = reps[1].o.Deliver(held, reps[1].slack, thread(), channels.Reply{Text: "one too many"})
	if n := len(fake.Posts()); n != 3 {
		t.Errorf("%d posts; the fourth in a quiet spell of an hour's pace went out past the burst", n)
	}
}
