package gateway

import (
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/sessions"
)

// SectionName is the key of the file this package defines.
const SectionName = "gateway"

// Section is the gateway: section: the worker pool, the shutdown drain,
// and when a turn shows that it is running.
type Section struct {
	Workers         int           `yaml:"workers"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// TypingDelay is how long a turn runs before the channel's typing
	// indicator (Slack's :eyes: reaction, Feishu's, WeChat's "typing…")
	// is shown; a faster answer shows none. 0 shows it at once.
	TypingDelay time.Duration `yaml:"typing_delay"`
}

// DefaultSection is the gateway: section when the file says nothing, and
// what New falls back to for Workers left zero: the one place these
// defaults are set.
func DefaultSection() *Section {
	return &Section{Workers: 16, ShutdownTimeout: 30 * time.Second, TypingDelay: 500 * time.Millisecond}
}

func init() {
	config.RegisterSection(config.SectionSpec{Name: SectionName, NewConfig: func() config.SectionConfig { return DefaultSection() }})
}

// SectionFrom returns c's gateway: section, or the defaults when c has
// none (a Config built by hand).
func SectionFrom(c config.Config) *Section {
	return config.SectionOr(c, SectionName, DefaultSection)
}

// Env implements config.SectionConfig: no variable overrides the section.
func (s *Section) Env() []config.EnvVar { return nil }

// Validate implements config.SectionConfig.
func (s *Section) Validate() error {
	var errs []error
	if s.Workers <= 0 {
		errs = append(errs, fmt.Errorf("workers: must be greater than 0, got %d", s.Workers))
	}
	if s.TypingDelay < 0 {
		errs = append(errs, errors.New("typing_delay: must not be negative"))
	}
	if s.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("shutdown_timeout: must be a positive duration such as 30s"))
	}
	return errors.Join(errs...)
}

// ConfigFrom returns the Config of the file's sections that the gateway
// reads: gateway:, sessions: and skills.body_budget. The caller adds the
// parts (Policy, Tools, Outbox, …).
func ConfigFrom(c config.Config) Config {
	gw, s := SectionFrom(c), sessions.FromConfig(c)
	return Config{
		Workers:         gw.Workers,
		TypingDelay:     gw.TypingDelay,
		QueueLimit:      s.QueueLimit,
		MaxMessageChars: s.MaxMessageChars,
		CompactTokens:   s.CompactTokens,
		KeepRounds:      s.KeepRounds,
		SkillBudget:     c.Skills.BodyBudget,
	}
}
