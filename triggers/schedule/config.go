package schedule

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/triggers"
	"github.com/robfig/cron/v3"
)

// What a schedule does about fire times that passed while no replica ran.
const (
	// MissedSkip drops them: only a fire at most Grace late runs.
	MissedSkip = "skip"
	// MissedOnce runs the latest of them once, however late.
	MissedOnce = "once"
)

// Grace is how late a fire time may still run under missed: skip. A fire
// later than that was missed (the process was down); a later fire time
// that is due supersedes an earlier one that never started.
const Grace = 5 * time.Minute

// Config is this package's part of the triggers: section (which package
// triggers/section puts together): the schedules of the file, and the
// bounds of the ones chat administrators add.
type Config struct {
	Schedules map[string]*Schedule `yaml:"schedules"`
	// MaxPerChat bounds the schedules /schedule add keeps per chat.
	MaxPerChat int `yaml:"max_per_chat"`
	// MinInterval is the shortest gap between two fires of a schedule
	// added in a chat.
	MinInterval time.Duration `yaml:"min_interval"`
}

// Schedule is triggers.schedules.NAME.
type Schedule struct {
	// Cron is five fields or a descriptor (@daily, @every 1h).
	Cron string `yaml:"cron"`
	// Timezone is an IANA name; empty is UTC.
	Timezone string               `yaml:"timezone"`
	To       triggers.Destination `yaml:"to"`
	// Answer is post (Text is posted) or agent (Prompt is the turn).
	Answer string `yaml:"answer"`
	Text   string `yaml:"text"`
	Prompt string `yaml:"prompt"`
	Skill  string `yaml:"skill"`
	// Missed is skip (default) or once.
	Missed string `yaml:"missed"`
}

// DefaultConfig is the part when the file says nothing: the one place
// its defaults are set.
func DefaultConfig() *Config {
	return &Config{MaxPerChat: 10, MinInterval: 15 * time.Minute}
}

// Holder is the triggers: section that holds this package's part
// (triggers/section's Config).
type Holder interface {
	ScheduleSection() *Config
}

// FromConfig returns c's schedules part of the triggers: section, or the
// defaults when c has none (a Config built by hand).
func FromConfig(c config.Config) *Config {
	if h, ok := c.Sections[triggers.SectionName].(Holder); ok {
		return h.ScheduleSection()
	}
	return DefaultConfig()
}

// Env implements config.SectionConfig: no variable overrides the part.
func (c *Config) Env() []config.EnvVar { return nil }

// Validate implements config.SectionConfig.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxPerChat < 0 {
		errs = append(errs, fmt.Errorf("max_per_chat: must be 0 (no chat schedules) or more, got %d", c.MaxPerChat))
	}
	if c.MinInterval < time.Minute {
		errs = append(errs, errors.New("min_interval: must be at least 1m"))
	}
	names := make([]string, 0, len(c.Schedules))
	for name := range c.Schedules {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		key := "schedules." + name
		if !triggers.ValidName(name) {
			errs = append(errs, fmt.Errorf("%s: a name is lower-case letters, digits, '-' and '_'", key))
		}
		s := c.Schedules[name]
		if s == nil {
			errs = append(errs, fmt.Errorf("%s: is empty", key))
			continue
		}
		for _, err := range s.problems() {
			errs = append(errs, fmt.Errorf("%s.%w", key, err))
		}
	}
	return errors.Join(errs...)
}

// problems lists what is wrong with s, each error starting with its key.
func (s *Schedule) problems() []error {
	var errs []error
	if _, err := Parse(s.Cron, s.Timezone); err != nil {
		errs = append(errs, err)
	}
	if err := s.To.Validate(); err != nil {
		errs = append(errs, err)
	}
	switch s.Answer {
	case triggers.AnswerPost:
		if s.Text == "" {
			errs = append(errs, errors.New("text: is required with answer: post"))
		}
	case triggers.AnswerAgent:
		if s.Prompt == "" {
			errs = append(errs, errors.New("prompt: is required with answer: agent"))
		}
	default:
		errs = append(errs, fmt.Errorf("answer: must be post or agent, got %q", s.Answer))
	}
	if s.Missed != "" && s.Missed != MissedSkip && s.Missed != MissedOnce {
		errs = append(errs, fmt.Errorf("missed: must be skip or once, got %q", s.Missed))
	}
	return errs
}

// parser reads five fields and the descriptors, as the issue asks:
// robfig/cron's standard parser.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse reads a cron expression in the named time zone ("" is UTC). Its
// errors start with the key they are about (cron:, timezone:).
func Parse(spec, timezone string) (cron.Schedule, error) {
	loc := time.UTC
	if timezone != "" {
		l, err := time.LoadLocation(timezone)
		if err != nil {
			return nil, fmt.Errorf("timezone: %q is not an IANA time zone", timezone)
		}
		loc = l
	}
	if spec == "" {
		return nil, errors.New("cron: is required")
	}
	if len(spec) > 100 {
		return nil, errors.New("cron: is longer than 100 characters")
	}
	// A TZ= prefix would override timezone: keep one way to say it.
	if len(spec) > 3 && (spec[:3] == "TZ=" || len(spec) > 7 && spec[:7] == "CRON_TZ") {
		return nil, errors.New("cron: set the time zone with timezone:, not in the expression")
	}
	sched, err := parser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("cron: %w", err)
	}
	return inZone{sched, loc}, nil
}

// inZone runs a schedule's fields in loc.
type inZone struct {
	cron.Schedule
	loc *time.Location
}

// Next returns the next fire time after t, in UTC.
func (z inZone) Next(t time.Time) time.Time {
	return z.Schedule.Next(t.In(z.loc)).UTC()
}
