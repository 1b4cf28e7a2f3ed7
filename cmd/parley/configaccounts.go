package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/triggers"
	triggersection "github.com/parleyhq/parley/triggers/section"
)

// accountNamer is a platform's section that configures accounts (apps
// of the platform: slack.accounts.NAME), as the policies learn them.
type accountNamer interface {
	AccountNames() []string
}

// printAccounts writes, after the effective configuration of `parley
// config check`, every platform's accounts as YAML comments: how each is
// reached (its routes, its connection), the policy levels that name it,
// the profile its messages get unless a workspace or chat chooses
// another, and the triggers that post as it. It names no platform: any
// section reporting AccountNames is listed, with its transports when it
// reports them (channels.AccountTransports), when its configuration
// turns it on. It prints no credential. A configuration without accounts
// prints nothing more.
func printAccounts(w io.Writer, cfg config.Config) {
	uses := accountUses{tree: policy.FromConfig(cfg), resolver: policy.NewFromConfig(cfg), destinations: triggersection.Destinations(cfg)}
	header := false
	for _, p := range config.Platforms() {
		sec, ok := cfg.Platforms[p.Name].(accountNamer)
		if !ok || !cfg.Platforms[p.Name].Enabled() {
			continue // a platform the configuration leaves off has no apps to list
		}
		var transports map[string]channels.Transport
		if t, ok := sec.(channels.AccountTransports); ok {
			transports = t.Transports()
		}
		for _, name := range sec.AccountNames() {
			if !header {
				fmt.Fprintln(w, "# accounts, how each is reached, the policy levels that name it, its profile (unless a workspace or chat chooses another) and the triggers posting as it:")
				header = true
			}
			t, known := transports[name]
			uses.print(w, p.Name, name, t, known)
		}
	}
}

// accountUses is what may use an account: the policy tree, its profiles
// and the triggers' destinations.
type accountUses struct {
	tree         *policy.Config
	resolver     *policy.Resolver
	destinations map[string]triggers.Destination
}

// print writes one account's entry; its transport when known.
func (u accountUses) print(w io.Writer, platform, name string, t channels.Transport, known bool) {
	label := channels.AdapterKey(platform, name)
	if name == channels.DefaultAccount {
		label = platform + "/" + name + " (the section's own keys)"
	}
	fmt.Fprintf(w, "#   %s:\n", label)
	if known {
		fmt.Fprintf(w, "#     reached by: %s\n", t)
	}
	fmt.Fprintf(w, "#     policy levels: %s\n", orNone(accountLevels(u.tree, platform, name)))
	fmt.Fprintf(w, "#     profile: %s\n", accountProfile(u.resolver, platform, name))
	fmt.Fprintf(w, "#     triggers posting as it: %s\n", orNone(postingAs(u.destinations, platform, name)))
}

// accountLevels lists the keys of the policy levels that apply to an
// account alone (policies.platforms.P.accounts.A): one or none.
func accountLevels(tree *policy.Config, platform, account string) []string {
	if _, ok := tree.Platforms[platform].Accounts[account]; ok {
		return []string{"policies.platforms." + platform + ".accounts." + account}
	}
	return nil
}

// accountProfile names the profile an account's messages get, and the
// level that chose it, before any workspace or chat level decides.
func accountProfile(r *policy.Resolver, platform, account string) string {
	scope := policy.Scope{Channel: platform, Account: account}
	if account == channels.DefaultAccount {
		scope.Account = ""
	}
	p := r.Resolve(scope).Profile()
	if p.Name == "" {
		return "none (the default system prompt)"
	}
	name := p.Name
	if p.DisplayName != "" {
		name += " (" + p.DisplayName + ")"
	}
	return fmt.Sprintf("%s, chosen at %s", name, p.Level)
}

// postingAs lists, sorted, the keys of the triggers' destinations that
// post as an account: those naming it in to.account, and for the default
// account those naming none.
func postingAs(destinations map[string]triggers.Destination, platform, account string) []string {
	var keys []string
	for key, d := range destinations {
		named := d.Account
		if named == "" {
			named = channels.DefaultAccount
		}
		if d.Platform == platform && named == account {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

func orNone(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
}
