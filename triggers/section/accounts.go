package section

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/triggers"
)

// accounted is a platform section with several apps (slack.accounts.NAME).
type accounted interface {
	AccountNames() []string
}

// checkAccounts refuses a destination naming an app its platform does not
// configure: the work would find no adapter to post it and wait for one
// until its max age.
func checkAccounts(c config.Config) error {
	sec, ok := c.Sections[triggers.SectionName].(*Config)
	if !ok {
		return nil
	}
	var problems []string
	for key, d := range sec.destinations() {
		if d.Account == "" || d.Account == "default" {
			continue
		}
		var known []string
		if a, ok := c.Platforms[d.Platform].(accounted); ok {
			known = a.AccountNames()
		}
		if !slices.Contains(known, d.Account) {
			problems = append(problems, fmt.Sprintf("%s.%s.to.account: %q is not an account of %s (it configures %s)",
				triggers.SectionName, key, d.Account, d.Platform, names(known)))
		}
	}
	sort.Strings(problems)
	return config.Problems(problems)
}

// destinations are every destination of the section, by its key within
// it ("schedules.digest", "webhooks.am", "webhooks.am.routes[0]").
func (c *Config) destinations() map[string]triggers.Destination {
	out := map[string]triggers.Destination{}
	for name, s := range c.Schedules.Schedules {
		if s != nil {
			out["schedules."+name] = s.To
		}
	}
	for name, w := range c.Webhooks.Webhooks {
		if w == nil {
			continue
		}
		out["webhooks."+name] = w.To
		for i, r := range w.Routes {
			out[fmt.Sprintf("webhooks.%s.routes[%d]", name, i)] = r.To
		}
	}
	return out
}

func names(known []string) string {
	if len(known) == 0 {
		return "none"
	}
	return strings.Join(known, ", ")
}
