package gateway_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/slack"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/triggers"
	"github.com/parleyhq/parley/triggers/schedule"
)

// schedClock is a test's time for schedulers: it moves when the test says.
type schedClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters map[chan time.Time]time.Time
}

func (c *schedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *schedClock) Until(t time.Time) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !t.After(c.now) {
		ch <- c.now
		return ch, func() {}
	}
	c.waiters[ch] = t
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.waiters, ch)
	}
}

func (c *schedClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for ch, at := range c.waiters {
		if !at.After(c.now) {
			ch <- c.now
			delete(c.waiters, ch)
		}
	}
}

// TestScheduleOnThreeReplicasPostsOncePerFire: a schedule every minute,
// run by the schedulers of three replicas sharing one Redis, each handing
// its fires to its own gateway with a real Slack adapter: five minutes
// are five posts in the fake Slack's channel, each a new message of the
// chat.
func TestScheduleOnThreeReplicasPostsOncePerFire(t *testing.T) {
	t.Parallel()
	r, model, fake := redistest.New(t), openaitest.New(t), slacktest.New(t)
	clock := &schedClock{now: time.Date(2026, 3, 2, 8, 59, 30, 0, time.UTC), waiters: map[chan time.Time]time.Time{}}
	sched, err := schedule.Parse("* * * * *", "")
	if err != nil {
		t.Fatal(err)
	}
	src := schedule.Static{{Name: "standup", Label: "standup", Schedule: sched, Work: triggers.Work{
		To: triggers.Destination{Platform: slack.Name, Workspace: slacktest.TeamID, Chat: "C0456"}, Answer: triggers.AnswerPost, Text: "Stand-up time"}}}
	// The first pass of one scheduler sets the schedule's cursor, so that
	// the fires counted start with the first minute.
	var stops []func()
	for i := range 3 {
		rp := newSlackReplica(t, r, model, fake)
		s := schedule.New(schedule.Options{Claims: schedule.NewClaims(r.Client, r.Prefix), Source: src, Submitter: rp.gw, Clock: clock, Metrics: rp.metrics})
		if i == 0 {
			if _, err := s.Pass(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { _ = s.Run(ctx) })
		stop := sync.OnceFunc(func() { cancel(); wg.Wait() })
		t.Cleanup(stop)
		stops = append(stops, stop)
	}
	for i := 1; i <= 5; i++ {
		clock.advance(time.Minute)
		slacktest.WaitFor(t, fmt.Sprintf("fire %d posted", i), 30*time.Second, func() bool { return len(fake.Posts()) >= i })
	}
	for _, stop := range stops {
		stop()
	}
	posts := fake.Posts()
	if len(posts) != 5 {
		t.Fatalf("%d posts for five fires: %+v", len(posts), posts)
	}
	for _, p := range posts {
		if p.Channel != "C0456" || p.Text != "Stand-up time" || p.ThreadTS != "" {
			t.Errorf("post %+v: want the schedule's text as a new message of C0456", p)
		}
	}
}
