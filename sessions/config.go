package sessions

import (
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/config"
)

// Section is the key of the file this package defines.
const SectionName = "sessions"

// Config is the sessions: section: what one conversation may hold and how
// long. The store reads the history and lock keys (see Options); the
// gateway the queue, message and compaction limits.
type Config struct {
	HistoryTTL      time.Duration `yaml:"history_ttl"`
	MaxMessages     int           `yaml:"max_messages"`
	MaxMessageChars int           `yaml:"max_message_chars"`
	LockTTL         time.Duration `yaml:"lock_ttl"`
	QueueLimit      int           `yaml:"queue_limit"`
	CompactTokens   int           `yaml:"compact_tokens"`
	KeepRounds      int           `yaml:"keep_rounds"`
}

// DefaultConfig is the sessions: section when the file says nothing. It is
// the one place these defaults are set: Options and the gateway fall back
// to it for a field left zero.
func DefaultConfig() *Config {
	return &Config{
		HistoryTTL:      7 * 24 * time.Hour,
		MaxMessages:     200,
		MaxMessageChars: 8000,
		LockTTL:         15 * time.Second,
		QueueLimit:      50,
		CompactTokens:   24000,
		KeepRounds:      4,
	}
}

func init() {
	config.RegisterSection(config.SectionSpec{Name: SectionName, NewConfig: func() config.SectionConfig { return DefaultConfig() }})
}

// FromConfig returns c's sessions: section, or the defaults when c has
// none (a Config built by hand).
func FromConfig(c config.Config) *Config {
	return config.SectionOr(c, SectionName, DefaultConfig)
}

// Env implements config.SectionConfig: no variable overrides the section.
func (c *Config) Env() []config.EnvVar { return nil }

// Validate implements config.SectionConfig.
func (c *Config) Validate() error {
	var errs []error
	for _, p := range []struct {
		key string
		v   int
	}{{"max_messages", c.MaxMessages}, {"max_message_chars", c.MaxMessageChars}, {"queue_limit", c.QueueLimit},
		{"compact_tokens", c.CompactTokens}, {"keep_rounds", c.KeepRounds}} {
		if p.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be greater than 0, got %d", p.key, p.v))
		}
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"history_ttl", c.HistoryTTL}, {"lock_ttl", c.LockTTL}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be a positive duration such as 30s", d.key))
		}
	}
	if c.LockTTL > 0 && c.LockTTL < time.Second {
		errs = append(errs, errors.New("lock_ttl: must be at least 1s so renewals can keep up"))
	}
	return errors.Join(errs...)
}

// Options is what the store takes of the section, under the key prefix
// of redis.prefix.
func (c *Config) Options(prefix string) Options {
	return Options{Prefix: prefix, HistoryTTL: c.HistoryTTL, MaxMessages: c.MaxMessages, LockTTL: c.LockTTL}
}
