package retry

import (
	"errors"
	"fmt"
	"time"
)

// Config is the retry: section that every platform's and tool source's
// section of the configuration carries, under the same three keys
// (slack.retry.max_attempts, tools.mcp.retry.base, …). Each section sets
// its own defaults in its DefaultConfig; a zero field of a Config built in
// code takes the section's default through Or.
type Config struct {
	// MaxAttempts is the number of tries of one call, the first included.
	MaxAttempts int `yaml:"max_attempts"`
	// Base is the first wait before trying again, doubling with every
	// failure (each wait is jittered, see Backoff).
	Base time.Duration `yaml:"base"`
	// Max is the longest wait.
	Max time.Duration `yaml:"max"`
}

// Or returns c with its zero fields taken from d, the section's defaults;
// a Max below Base is raised to Base.
func (c Config) Or(d Config) Config {
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = d.MaxAttempts
	}
	if c.Base <= 0 {
		c.Base = d.Base
	}
	if c.Max <= 0 {
		c.Max = d.Max
	}
	c.Max = max(c.Max, c.Base)
	return c
}

// Validate reports every problem of c, each naming its key relative to
// the section ("retry.base: …").
func (c Config) Validate() error {
	var errs []error
	if c.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("retry.max_attempts: %d is negative; it counts the tries of a call, the first included", c.MaxAttempts))
	}
	if c.Base < 0 {
		errs = append(errs, fmt.Errorf("retry.base: %s is negative", c.Base))
	}
	if c.Max < 0 {
		errs = append(errs, fmt.Errorf("retry.max: %s is negative", c.Max))
	}
	if c.Base > 0 && c.Max > 0 && c.Max < c.Base {
		errs = append(errs, fmt.Errorf("retry.max: %s is shorter than retry.base (%s)", c.Max, c.Base))
	}
	return errors.Join(errs...)
}

// Policy is the Policy of a Retrier shaped by c.
func (c Config) Policy() Policy {
	return Policy{Attempts: c.MaxAttempts, MinWait: c.Base, MaxWait: c.Max}
}

// Backoff is the Backoff of a reconnect loop shaped by c.
func (c Config) Backoff() Backoff { return Backoff{Min: c.Base, Max: c.Max} }
