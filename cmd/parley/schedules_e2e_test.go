package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels/slack/slacktest"
)

// tickEvery is the schedule of the binary-level schedule test: robfig's
// @every descriptor, which the parser of triggers.schedules accepts, fast
// enough for a test to see many fires.
const tickEvery = 2 * time.Second

// scheduleCluster is newCluster with a schedule posting "tick" into
// C-TICK every tickEvery, whose missed fires run once.
func scheduleCluster(t *testing.T) *cluster {
	t.Helper()
	c := newCluster(t)
	c.cfg = writeConfig(t, fmt.Sprintf(`redis:
  prefix: %q
slack:
  post_every: 20ms
sessions:
  lock_ttl: 2s
gateway:
  shutdown_timeout: 20s
triggers:
  schedules:
    tick:
      cron: "@every %s"
      to: {platform: slack, workspace: %s, chat: C-TICK}
      answer: post
      text: tick
      missed: once
`, c.redis.Prefix, tickEvery, slacktest.TeamID))
	return c
}

// fired lists the fire times of tick that a replica marked done in Redis
// (fired, not skipped as missed), oldest first.
func fired(t *testing.T, c *cluster) []time.Time {
	t.Helper()
	ctx := t.Context()
	keys, err := c.redis.Client.Keys(ctx, c.redis.Prefix+"schedule:{tick}:fire:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		return nil
	}
	// One read of them all: a key's value is "done" or a live lease.
	vals, err := c.redis.Client.MGet(ctx, keys...).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for i, k := range keys {
		if vals[i] != "done" {
			continue // a live lease
		}
		sec, err := strconv.ParseInt(k[strings.LastIndex(k, ":")+1:], 10, 64)
		if err != nil {
			t.Fatalf("fire key %q", k)
		}
		out = append(out, time.Unix(sec, 0).UTC())
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

func tickPosts(c *cluster) int {
	n := 0
	for _, p := range c.slack.Posts() {
		if p.Channel == "C-TICK" && p.Text == "tick" {
			n++
		}
	}
	return n
}

// stop ends rp with SIGTERM (it drains) and waits for it.
func (rp *replica) stop(t *testing.T) {
	t.Helper()
	rp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-rp.exited:
		if rp.err != nil {
			t.Fatalf("parley serve exited with %v after SIGTERM:\n%s", rp.err, rp.stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("parley serve did not exit after SIGTERM")
	}
}

// TestScheduleFiresOnceAcrossReplicasKilledAndRestarted: three `parley
// serve` processes run one schedule; each fire time is posted once while
// they run, after one of them is SIGKILLed mid-run (a lease it held ends
// and another replica takes that fire over), and after every replica was
// stopped across several fire times: the first replica back runs the
// latest missed fire once (missed: once) and skips the others. In the
// end the channel has exactly one post per fire marked done in Redis.
func TestScheduleFiresOnceAcrossReplicasKilledAndRestarted(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	c := scheduleCluster(t)
	a, b, d := c.start(t), c.start(t), c.start(t)
	const deadline = 90 * time.Second

	slacktest.WaitFor(t, "three fires", deadline, func() bool { return len(fired(t, c)) >= 3 })
	b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.exited
	killed := len(fired(t, c))
	slacktest.WaitFor(t, "three fires after a replica was killed", deadline, func() bool { return len(fired(t, c)) >= killed+3 })
	a.stop(t)
	d.stop(t)

	before := fired(t, c)
	last := before[len(before)-1]
	// Every replica is down while at least three fire times pass.
	slacktest.WaitFor(t, "three fire times to pass with no replica up", deadline, func() bool {
		return time.Now().After(last.Add(3*tickEvery + time.Second))
	})
	back := time.Now().UTC()
	e := c.start(t)
	slacktest.WaitFor(t, "the catch-up fire", deadline, func() bool { return len(fired(t, c)) > len(before) })
	// The first fire done after the downtime is its latest fire time (or
	// one just after, passed while e started): the three or more before
	// it were skipped, none posted.
	after := fired(t, c)
	if len(after) <= len(before) || !slices.Equal(after[:len(before)], before) {
		t.Fatalf("the fires done before the downtime changed: %v, then %v", before, after)
	}
	first := after[len(before)]
	if first.Before(back.Add(-tickEvery)) || first.Before(last.Add(3*tickEvery)) {
		t.Fatalf("the first fire after the restart is %v (down from %v to %v); want the latest, the earlier ones skipped", first, last, back)
	}
	missed, _ := strconv.ParseFloat(metricOf(t, e.base, `parley_schedule_fires_total{outcome="missed",schedule="tick"}`), 64)
	if missed < 2 {
		t.Errorf("the restarted replica counted %v missed fires; want the downtime's earlier ones", missed)
	}
	slacktest.WaitFor(t, "a fire after the catch-up", deadline, func() bool {
		now := fired(t, c)
		return now[len(now)-1].After(first)
	})
	for end := time.Now().Add(deadline); tickPosts(c) < len(fired(t, c)); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			var posts []string
			for _, p := range c.slack.Posts() {
				posts = append(posts, p.Channel+" "+p.TS+" "+p.Text)
			}
			t.Fatalf("%d posts for %d fires done %v; posts: %v\ncalls: %v", tickPosts(c), len(fired(t, c)), fired(t, c), posts, c.slack.Calls())
		}
	}
	e.stop(t)

	// Nothing runs any more: every fire done is one post, none twice.
	if posts, done := tickPosts(c), len(fired(t, c)); posts != done {
		t.Fatalf("%d posts for %d fires; want one each", posts, done)
	}
	if len(fired(t, c)) < 8 {
		t.Errorf("only %d fires in the whole run", len(fired(t, c)))
	}
}
