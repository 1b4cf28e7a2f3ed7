package section

import (
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/triggers"
)

// Destinations lists every destination of c's triggers: section by its
// full key ("triggers.schedules.digest", "triggers.webhooks.am.routes[0]"),
// for `parley config check`'s listing of what posts as each account;
// none when c has no such section.
func Destinations(c config.Config) map[string]triggers.Destination {
	sec, ok := c.Sections[triggers.SectionName].(*Config)
	if !ok {
		return nil
	}
	out := map[string]triggers.Destination{}
	for key, d := range sec.destinations() {
		out[triggers.SectionName+"."+key] = d
	}
	return out
}
