// Package files keeps the files a turn's tools make — checked against
// what they claim to be, bounded — and offers send_file, the builtin tool
// that sends one of them (or a chart it renders) with the answer.
package files

import (
	"errors"
	"fmt"

	"github.com/parleyhq/parley/config"
)

// SectionName is the key of the file this package defines.
const SectionName = "files"

// Config is the files: section: what a turn may keep of the files its
// tools make.
type Config struct {
	// MaxBytes bounds one file; a larger one is refused before it is
	// looked at.
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxPerTurn bounds the files one turn keeps; later ones are refused.
	MaxPerTurn int `yaml:"max_per_turn"`
}

// DefaultConfig is the files: section when the file says nothing.
func DefaultConfig() *Config {
	return &Config{MaxBytes: 20 << 20, MaxPerTurn: 5}
}

func init() {
	config.RegisterSection(config.SectionSpec{Name: SectionName, NewConfig: func() config.SectionConfig { return DefaultConfig() }})
}

// FromConfig returns c's files: section, or the defaults when c has none.
func FromConfig(c config.Config) *Config {
	return config.SectionOr(c, SectionName, DefaultConfig)
}

// Env implements config.SectionConfig: no variable overrides the section.
func (c *Config) Env() []config.EnvVar { return nil }

// Validate implements config.SectionConfig.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxBytes <= 0 {
		errs = append(errs, fmt.Errorf("max_bytes: must be greater than 0, got %d", c.MaxBytes))
	}
	if c.MaxBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("max_bytes: at most 1 GiB (every file is kept in Redis), got %d", c.MaxBytes))
	}
	if c.MaxPerTurn < 0 {
		errs = append(errs, errors.New("max_per_turn: must not be negative"))
	}
	return errors.Join(errs...)
}
