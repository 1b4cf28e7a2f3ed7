package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/policy"
)

// printProfiles writes, after the effective configuration of `parley
// config check`, the profiles and the levels that choose them, as YAML
// comments: the output still reads back as the same configuration. A
// configuration without profiles prints nothing more.
func printProfiles(w io.Writer, cfg config.Config) {
	profiles := policy.ProfilesFromConfig(cfg)
	names := profiles.Names()
	if len(names) == 0 {
		return
	}
	uses := profiles.Uses(policy.FromConfig(cfg))
	fmt.Fprintln(w, "# profiles, and the policy levels that choose them:")
	for _, name := range names {
		label := name
		if d := profiles.ByName[name].DisplayName; d != "" {
			label += " (" + d + ")"
		}
		used := "chosen by no level"
		if keys := uses[name]; len(keys) > 0 {
			used = strings.Join(keys, ", ")
		}
		fmt.Fprintf(w, "#   %s: %s\n", label, used)
	}
}
