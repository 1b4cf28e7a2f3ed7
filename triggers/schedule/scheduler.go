// Package schedule is the cron trigger: triggers.schedules.NAME of the
// file and the schedules chat administrators add with /schedule. Every
// replica runs a Scheduler; each fire time of a schedule runs once across
// them, by a claim in Redis per schedule and fire time (a lease while one
// replica hands the work to the gateway, "done" after), and the work's ID
// (the schedule's name and fire time) is de-duplicated by the gateway
// besides. A replica that dies mid-fire leaves a lease that ends: another
// replica takes the fire over. A fire time that passed while nobody ran
// is missed: skipped, or with missed: once the latest one runs once.
package schedule

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/triggers"
	"github.com/robfig/cron/v3"
)

// ChatLabel is the schedule label of every schedule added in a chat: they
// are as many as the chats, so they share one series.
const ChatLabel = "chat"

// Clock is the scheduler's time: the real one, or a test's.
type Clock interface {
	Now() time.Time
	// Until returns a channel that receives once the time is at or past t.
	// stop releases it when the caller no longer waits.
	Until(t time.Time) (c <-chan time.Time, stop func())
}

// RealClock is the wall clock.
type RealClock struct{}

// Now implements Clock.
func (RealClock) Now() time.Time { return time.Now() }

// Until implements Clock.
func (RealClock) Until(t time.Time) (<-chan time.Time, func()) {
	tm := time.NewTimer(time.Until(t))
	return tm.C, func() { tm.Stop() }
}

// Entry is one schedule the scheduler runs.
type Entry struct {
	// Name is unique: a name of the file, or "chat:ID".
	Name     string
	Label    string // its metric label
	Spec     string // the expression Schedule was parsed from
	Schedule cron.Schedule
	Missed   string
	// Work is what each fire submits; ID and Trigger are filled in.
	Work triggers.Work
}

// Source lists the schedules to run, read at every pass (so a schedule
// added in a chat on another replica is seen).
type Source interface {
	Entries(ctx context.Context) ([]Entry, error)
}

// Options are a Scheduler's parts. Clock, Log and Metrics default to the
// wall clock, slog.Default and a private set.
type Options struct {
	Claims    *Claims
	Source    Source
	Submitter triggers.Submitter
	Clock     Clock
	Log       *slog.Logger
	Metrics   *metrics.Metrics
	// Lease is how long a claim holds a fire for the replica that took it
	// (default 30s): after it, another replica fires it.
	Lease time.Duration
	// Poll is the longest wait between passes (default 15s), for the
	// schedules others add and the leases that end.
	Poll time.Duration
}

// Scheduler fires the schedules of Source.
type Scheduler struct {
	o     Options
	token string
}

// New returns a Scheduler; Run starts it.
func New(o Options) *Scheduler {
	if o.Clock == nil {
		o.Clock = RealClock{}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	o.Log = o.Log.With("component", "schedule")
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 15 * time.Second
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Scheduler{o: o, token: hex.EncodeToString(b[:])}
}

// Run fires schedules until ctx ends, then returns nil. A failed pass
// (Redis down) is logged and tried again at the next wake.
func (s *Scheduler) Run(ctx context.Context) error {
	for {
		wake, err := s.Pass(ctx)
		if err != nil && ctx.Err() == nil {
			s.o.Log.Warn("schedule pass failed", "err", err)
		}
		c, stop := s.o.Clock.Until(wake)
		select {
		case <-ctx.Done():
			stop()
			return nil
		case <-c:
			stop()
		}
	}
}

// Pass runs what is due of every schedule and returns when to look again.
func (s *Scheduler) Pass(ctx context.Context) (time.Time, error) {
	now := s.o.Clock.Now()
	wake := now.Add(s.o.Poll)
	entries, err := s.o.Source.Entries(ctx)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range entries {
		next, err := s.runEntry(ctx, e, now)
		if err != nil {
			errs = append(errs, err)
		}
		if next.Before(wake) {
			wake = next
		}
	}
	if len(errs) > 0 {
		return wake, fmt.Errorf("schedule: %d schedules failed, first: %w", len(errs), errs[0])
	}
	return wake, nil
}

// maxScan bounds the fire times looked at after the cursor: past it (a
// minutely schedule down for months) the rest are missed unseen.
const maxScan = 100000

// runEntry walks e's fire times after its cursor up to now, in order, and
// returns its next fire time after now.
func (s *Scheduler) runEntry(ctx context.Context, e Entry, now time.Time) (time.Time, error) {
	cursor, err := s.o.Claims.Cursor(ctx, e.Name, now)
	if err != nil {
		return now.Add(s.o.Poll), err
	}
	var due []time.Time
	for t := e.Schedule.Next(cursor); !t.IsZero() && !t.After(now); t = e.Schedule.Next(t) {
		if len(due) == maxScan {
			due = due[1:]
		}
		due = append(due, t)
	}
	for i, at := range due {
		latest := i == len(due)-1
		held, err := s.fire(ctx, e, at, now, latest)
		if err != nil || held {
			// Wait for the holder, or try again: the fires after this one
			// stay behind it.
			return now.Add(min(s.o.Lease, s.o.Poll)), err
		}
	}
	return e.Schedule.Next(now), nil
}

// fire runs or skips e's fire time at. held reports a fire another
// replica is running now.
func (s *Scheduler) fire(ctx context.Context, e Entry, at, now time.Time, latest bool) (held bool, err error) {
	state, abandoned, err := s.o.Claims.State(ctx, e.Name, at, now)
	switch {
	case err != nil:
		return false, err
	case state == Done:
		return false, s.o.Claims.Finish(ctx, e.Name, at, true)
	case state == Held:
		return true, nil
	}
	// Free: a fire that never started is missed when a later one is due,
	// or when it is too late under missed: skip. One a replica started and
	// left (its lease ended) was begun, so it is finished.
	if !abandoned && (!latest || e.Missed != MissedOnce && now.Sub(at) > Grace) {
		s.o.Metrics.ScheduleFires.WithLabelValues(e.Label, metrics.ScheduleMissed).Inc()
		s.o.Log.Warn("schedule fire missed", "schedule", e.Name, "at", at, "late", now.Sub(at).Round(time.Second))
		s.record(ctx, e, Result{At: at, Outcome: metrics.ScheduleMissed})
		return false, s.o.Claims.Finish(ctx, e.Name, at, false)
	}
	state, err = s.o.Claims.Claim(ctx, e.Name, at, s.token, now, now.Add(s.o.Lease))
	if err != nil || state != Won {
		return state == Held, err
	}
	return false, s.submit(ctx, e, at)
}

// submit hands e's fire at to the gateway and marks it done. On failure
// the claim's lease is left to end, after which a replica tries again.
func (s *Scheduler) submit(ctx context.Context, e Entry, at time.Time) error {
	w := e.Work
	w.ID = "schedule:" + e.Name + ":" + at.UTC().Format(time.RFC3339)
	w.Trigger = "schedule:" + e.Name
	if err := s.o.Submitter.SubmitWork(ctx, w); err != nil {
		s.o.Metrics.ScheduleFires.WithLabelValues(e.Label, metrics.ScheduleError).Inc()
		err = fmt.Errorf("schedule: submit %s: %w", w.ID, err)
		s.record(context.WithoutCancel(ctx), e, Result{At: at, Outcome: metrics.ScheduleError, Error: err.Error()})
		return err
	}
	s.record(ctx, e, Result{At: at, Outcome: metrics.ScheduleFired})
	s.o.Metrics.ScheduleLateness.Observe(max(0, s.o.Clock.Now().Sub(at).Seconds()))
	s.o.Metrics.ScheduleFires.WithLabelValues(e.Label, metrics.ScheduleFired).Inc()
	return s.o.Claims.Finish(context.WithoutCancel(ctx), e.Name, at, true)
}

// record keeps r as e's latest result; a failure only loses what the
// listing shows, so it is logged.
func (s *Scheduler) record(ctx context.Context, e Entry, r Result) {
	r.Done = s.o.Clock.Now()
	if err := s.o.Claims.Record(ctx, e.Name, r); err != nil {
		s.o.Log.Warn("schedule result not recorded", "schedule", e.Name, "err", err)
	}
}
