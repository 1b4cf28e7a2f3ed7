package audit

import (
	"errors"
	"time"

	"github.com/parleyhq/parley/config"
)

// SectionName is the key of the file this package defines.
const SectionName = "audit"

// Config is the audit: section: how long the ledger keeps what it records.
type Config struct {
	// Retention is how long an entry stays in the ledger; older entries
	// are trimmed as new ones are added.
	Retention time.Duration `yaml:"retention"`
}

// DefaultRetention is audit.retention when the file says nothing: thirty
// days, long enough to answer "who ran that" weeks later.
const DefaultRetention = 720 * time.Hour

// DefaultConfig is the audit: section when the file says nothing; the one
// place its defaults are set.
func DefaultConfig() *Config { return &Config{Retention: DefaultRetention} }

func init() {
	config.RegisterSection(config.SectionSpec{Name: SectionName, NewConfig: func() config.SectionConfig { return DefaultConfig() }})
}

// FromConfig returns c's audit: section, or the defaults when c has none
// (a Config built by hand).
func FromConfig(c config.Config) *Config {
	if s, ok := config.SectionOf[*Config](c, SectionName); ok {
		return s
	}
	return DefaultConfig()
}

// Env implements config.SectionConfig: no variable overrides the section.
func (c *Config) Env() []config.EnvVar { return nil }

// Validate implements config.SectionConfig.
func (c *Config) Validate() error {
	if c.Retention < time.Hour {
		return errors.New("retention: must be a duration of at least 1h, such as 720h")
	}
	return nil
}
