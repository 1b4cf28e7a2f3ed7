// Package section is the triggers: section of the configuration file,
// made of the parts the trigger sources own: each part's keys, defaults
// and validation live in the package that reads them (triggers/webhook,
// triggers/schedule), and each reads its part back with its own
// FromConfig. Only this package knows there are two; the binary links it
// in by importing it.
package section

import (
	"errors"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/triggers"
	"github.com/parleyhq/parley/triggers/schedule"
	"github.com/parleyhq/parley/triggers/webhook"
)

// Config is the triggers: section: the parts' keys side by side in one
// mapping of the file.
type Config struct {
	Schedules schedule.Config `yaml:",inline"`
	Webhooks  webhook.Section `yaml:",inline"`
}

// Default is the section when the file says nothing: each part's
// defaults.
func Default() *Config {
	return &Config{Schedules: *schedule.DefaultConfig(), Webhooks: *webhook.DefaultSection()}
}

func init() {
	config.RegisterSection(config.SectionSpec{Name: triggers.SectionName, NewConfig: func() config.SectionConfig { return Default() }, Check: checkAccounts})
}

// ScheduleSection implements schedule.Holder.
func (c *Config) ScheduleSection() *schedule.Config { return &c.Schedules }

// WebhookSection implements webhook.Holder.
func (c *Config) WebhookSection() *webhook.Section { return &c.Webhooks }

// Env implements config.SectionConfig: the parts' variables.
func (c *Config) Env() []config.EnvVar {
	return append(c.Schedules.Env(), c.Webhooks.Env()...)
}

// Validate implements config.SectionConfig: every part's problems, each
// naming its key within the section, one error each (config places each
// on its line, and reads only one level of errors.Join).
func (c *Config) Validate() error {
	var errs []error
	for _, err := range []error{c.Schedules.Validate(), c.Webhooks.Validate()} {
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			errs = append(errs, joined.Unwrap()...)
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
