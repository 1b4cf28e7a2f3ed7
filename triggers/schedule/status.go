package schedule

import (
	"context"
	"time"

	"github.com/parleyhq/parley/triggers"
)

// Status is what an operator sees of one schedule.
type Status struct {
	Name   string               `json:"name"`
	Source string               `json:"source"` // config or chat
	Cron   string               `json:"cron"`
	To     triggers.Destination `json:"to"`
	Answer string               `json:"answer"`
	Next   time.Time            `json:"next"`
	Last   *Result              `json:"last,omitempty"`
}

// Statuses lists the file's schedules, then the chats', with their next
// fire after now and their latest result.
func Statuses(ctx context.Context, conf *Config, chats *Chats, claims *Claims, now time.Time) ([]Status, error) {
	file, err := conf.FileEntries()
	if err != nil {
		return nil, err
	}
	own, err := chats.Entries(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Status, 0, len(file)+len(own))
	for _, e := range append(file, own...) {
		st := Status{Name: e.Name, Source: "config", Cron: e.Spec, To: e.Work.To, Answer: e.Work.Answer, Next: e.Schedule.Next(now)}
		if e.Label == ChatLabel {
			st.Source = "chat"
		}
		last, ok, err := claims.Last(ctx, e.Name)
		if err != nil {
			return nil, err
		}
		if ok {
			st.Last = &last
		}
		out = append(out, st)
	}
	return out, nil
}

// Lister lists the schedules as an operator sees them, for `parley
// triggers list` and the admin console.
type Lister struct {
	Config *Config
	Chats  *Chats
	Claims *Claims
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Schedules returns Statuses at the lister's now.
func (l Lister) Schedules(ctx context.Context) ([]Status, error) {
	now := time.Now()
	if l.Now != nil {
		now = l.Now()
	}
	return Statuses(ctx, l.Config, l.Chats, l.Claims, now)
}
