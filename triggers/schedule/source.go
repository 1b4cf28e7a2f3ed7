package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/parleyhq/parley/triggers"
)

// FileEntries returns the entries of the schedules of the file, by name.
func (c *Config) FileEntries() ([]Entry, error) {
	names := make([]string, 0, len(c.Schedules))
	for name := range c.Schedules {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]Entry, 0, len(names))
	for _, name := range names {
		s := c.Schedules[name]
		if s == nil {
			return nil, fmt.Errorf("schedule: triggers.schedules.%s is empty", name)
		}
		sched, err := Parse(s.Cron, s.Timezone)
		if err != nil {
			return nil, fmt.Errorf("schedule: triggers.schedules.%s.%w", name, err)
		}
		out = append(out, Entry{
			Name: name, Label: name, Spec: s.Cron, Schedule: sched, Missed: s.Missed,
			Work: triggers.Work{To: s.To, Answer: s.Answer, Text: s.Text, Prompt: s.Prompt, Skill: s.Skill},
		})
	}
	return out, nil
}

// Static is a Source of entries that do not change (the file's).
type Static []Entry

// Entries implements Source.
func (s Static) Entries(context.Context) ([]Entry, error) { return s, nil }

// Sources is a Source of several: every entry of each, the first failure
// joined with the entries of the others (the file's schedules run while
// Redis cannot list the chats').
type Sources []Source

// Entries implements Source.
func (ss Sources) Entries(ctx context.Context) ([]Entry, error) {
	var out []Entry
	var errs []error
	for _, s := range ss {
		e, err := s.Entries(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, e...)
	}
	return out, errors.Join(errs...)
}
