package schedule_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/triggers"
	"github.com/parleyhq/parley/triggers/schedule"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var slackChat = triggers.Destination{Platform: "slack", Workspace: "T0123", Chat: "C0456"}

func entry(t *testing.T, name, spec, missed string) schedule.Entry {
	t.Helper()
	sched, err := schedule.Parse(spec, "")
	if err != nil {
		t.Fatalf("Parse(%q): %v", spec, err)
	}
	return schedule.Entry{Name: name, Label: name, Schedule: sched, Missed: missed,
		Work: triggers.Work{To: slackChat, Answer: triggers.AnswerPost, Text: "digest of " + name}}
}

// replicas runs one scheduler per submitter on one Redis and one clock
// and returns a stop that ends them all and waits for them.
func replicas(t *testing.T, r *redistest.Redis, clock *fakeClock, m *metrics.Metrics, src schedule.Source, subs ...triggers.Submitter) (stop []func()) {
	t.Helper()
	for _, sub := range subs {
		ctx, cancel := context.WithCancel(context.Background())
		s := schedule.New(schedule.Options{Claims: schedule.NewClaims(r.Client, r.Prefix), Source: src,
			Submitter: sub, Clock: clock, Metrics: m})
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := s.Run(ctx); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
		once := sync.OnceFunc(func() { cancel(); wg.Wait() })
		t.Cleanup(once)
		stop = append(stop, once)
	}
	return stop
}

// TestThreeReplicasFireEachMinuteOnce: a schedule every minute on three
// schedulers sharing a Redis, for five minutes: five works, each fire
// time once.
func TestThreeReplicasFireEachMinuteOnce(t *testing.T) {
	r := redistest.New(t)
	clock := newFakeClock(time.Date(2026, 3, 2, 10, 0, 30, 0, time.UTC))
	m := metrics.New()
	rec := newRecorder()
	stops := replicas(t, r, clock, m, schedule.Static{entry(t, "minutely", "* * * * *", "")}, rec, rec, rec)
	clock.WaitWaiters(t, 3)
	for i := 1; i <= 5; i++ {
		clock.Advance(time.Minute)
		w := rec.next(t)
		want := time.Date(2026, 3, 2, 10, i, 0, 0, time.UTC).Format(time.RFC3339)
		if w.ID != "schedule:minutely:"+want || w.Trigger != "schedule:minutely" || w.To != slackChat || w.Text != "digest of minutely" {
			t.Fatalf("fire %d = %+v, want the schedule's work of %s", i, w, want)
		}
		clock.WaitWaiters(t, 3)
	}
	for _, stop := range stops {
		stop()
	}
	if n := len(rec.got); n != 0 {
		t.Errorf("%d more works after the five fires: a fire time ran twice", n)
	}
	if got := testutil.ToFloat64(m.ScheduleFires.WithLabelValues("minutely", metrics.ScheduleFired)); got != 5 {
		t.Errorf("parley_schedule_fires_total{fired} = %v, want 5", got)
	}
	if got := testutil.CollectAndCount(m.ScheduleLateness); got != 1 {
		t.Errorf("lateness series = %d, want 1", got)
	}
}

// TestAReplicaKilledMidFire: the replica that claimed a fire never
// finishes it; once its lease ends another replica fires it, once.
func TestAReplicaKilledMidFire(t *testing.T) {
	r := redistest.New(t)
	clock := newFakeClock(time.Date(2026, 3, 2, 10, 0, 30, 0, time.UTC))
	m := metrics.New()
	src := schedule.Static{entry(t, "minutely", "* * * * *", "")}
	dying := &stuck{entered: make(chan struct{})}
	killA := replicas(t, r, clock, m, src, dying)[0]
	clock.WaitWaiters(t, 1)
	clock.Advance(time.Minute) // 10:01:30: A claims 10:01 and hangs
	<-dying.entered
	rec := newRecorder()
	replicas(t, r, clock, m, src, rec)
	clock.WaitWaiters(t, 1) // B sees A's lease and waits for it
	killA()
	if n := len(rec.got); n != 0 {
		t.Fatalf("B fired while A's lease was live")
	}
	clock.Advance(31 * time.Second) // A's 30s lease has ended
	w := rec.next(t)
	if want := "schedule:minutely:2026-03-02T10:01:00Z"; w.ID != want {
		t.Fatalf("B fired %q, want A's abandoned %q", w.ID, want)
	}
	clock.WaitWaiters(t, 1)
	clock.Advance(time.Minute)
	if w := rec.next(t); w.ID != "schedule:minutely:2026-03-02T10:02:00Z" {
		t.Fatalf("next fire = %q, want 10:02", w.ID)
	}
	if got := testutil.ToFloat64(m.ScheduleFires.WithLabelValues("minutely", metrics.ScheduleError)); got != 1 {
		t.Errorf("error fires = %v, want 1 (A's)", got)
	}
}

// TestMissedAfterARestart: every replica is down across fire times. The
// daily schedule with missed: once runs its latest missed fire once, late;
// with skip it is counted missed and not run. A minutely schedule runs
// only its latest fire, which is on time, and counts the others missed.
func TestMissedAfterARestart(t *testing.T) {
	r := redistest.New(t)
	clock := newFakeClock(time.Date(2026, 3, 2, 8, 59, 30, 0, time.UTC))
	m := metrics.New()
	src := schedule.Static{
		entry(t, "digest-once", "0 9 * * *", schedule.MissedOnce),
		entry(t, "digest-skip", "0 9 * * *", schedule.MissedSkip),
		entry(t, "minutely", "* * * * *", schedule.MissedSkip),
	}
	first := newRecorder()
	stop := replicas(t, r, clock, m, src, first)[0]
	clock.WaitWaiters(t, 1)
	stop()
	clock.Advance(20 * time.Minute) // 09:19:30, nobody ran
	rec := newRecorder()
	stop = replicas(t, r, clock, m, src, rec)[0]
	clock.WaitWaiters(t, 1)
	stop()
	got := map[string]bool{}
	for len(rec.got) > 0 {
		got[(<-rec.got).ID] = true
	}
	want := map[string]bool{"schedule:digest-once:2026-03-02T09:00:00Z": true, "schedule:minutely:2026-03-02T09:19:00Z": true}
	if len(got) != len(want) || !got["schedule:digest-once:2026-03-02T09:00:00Z"] || !got["schedule:minutely:2026-03-02T09:19:00Z"] {
		t.Errorf("fired %v after the restart, want %v", got, want)
	}
	for _, c := range []struct {
		schedule, outcome string
		want              float64
	}{
		{"digest-once", metrics.ScheduleFired, 1}, {"digest-once", metrics.ScheduleMissed, 0},
		{"digest-skip", metrics.ScheduleFired, 0}, {"digest-skip", metrics.ScheduleMissed, 1},
		{"minutely", metrics.ScheduleFired, 1}, {"minutely", metrics.ScheduleMissed, 19},
	} {
		if got := testutil.ToFloat64(m.ScheduleFires.WithLabelValues(c.schedule, c.outcome)); got != c.want {
			t.Errorf("fires{%s,%s} = %v, want %v", c.schedule, c.outcome, got, c.want)
		}
	}
	if len(first.got) != 0 {
		t.Errorf("the first run fired %d before any fire time", len(first.got))
	}
	// The latest result of each is kept for `parley triggers list`.
	claims := schedule.NewClaims(r.Client, r.Prefix)
	for name, outcome := range map[string]string{"digest-once": metrics.ScheduleFired, "digest-skip": metrics.ScheduleMissed} {
		last, ok, err := claims.Last(context.Background(), name)
		if err != nil || !ok || last.Outcome != outcome || !last.At.Equal(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)) {
			t.Errorf("last result of %s = %+v, %v, %v; want %s of 09:00", name, last, ok, err, outcome)
		}
	}
}
