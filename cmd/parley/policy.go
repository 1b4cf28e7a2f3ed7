package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/skills/live"
)

// policyCLI is `parley policy explain`: the effective tools, skills, access
// and admins of one scope, with the config level that decided each.
func (e *environment) policy(args []string) error {
	if len(args) == 0 || args[0] != "explain" {
		return fmt.Errorf("%w: parley policy explain --channel C [--account A] [--workspace W] [--chat X]", errUsage)
	}
	fs := newFlagSet("policy explain", e.stderr)
	path := configFlag(fs)
	channel := fs.String("channel", "", "platform: one of "+strings.Join(config.PlatformNames(), ", "))
	account := fs.String("account", "", "account (app) of the platform, a key of its section's accounts (default: the section's own)")
	workspace := fs.String("workspace", "", "workspace or tenant id")
	chat := fs.String("chat", "", "chat id")
	wait := fs.Duration("wait", defaultListWait, "how long to wait for the MCP servers to list their tools")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *channel == "" {
		return fmt.Errorf("%w: --channel is required", errUsage)
	}
	// A misspelt platform would otherwise explain the policy of a channel
	// that never exists: every rule of policies.default, none of the
	// platform's own.
	if _, ok := config.LookupPlatform(*channel); !ok {
		return fmt.Errorf("policy explain: --channel %q is not a platform; want one of %s", *channel, strings.Join(config.PlatformNames(), ", "))
	}
	cfg, err := config.Load(*path, e.getenv)
	if err != nil {
		return err
	}
	// The tools are the ones a running bot registers: the skill and web
	// tools, and what the MCP servers list when asked now; skills come
	// from the same layers it loads.
	ts, err := e.cliTools(cfg, *wait)
	if err != nil {
		return err
	}
	defer ts.close()
	tools, notes := ts.policyTools()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	lib, err := live.Open(skillOptions(cfg, nil, log))
	if err != nil {
		return err
	}
	var names []string
	for _, s := range lib.Registry.Catalog().All() {
		names = append(names, s.Name)
	}
	if err := policy.NewFromConfig(cfg).WithModels(agent.ModelsFrom(cfg).Descriptions()).Explain(e.stdout, policy.Scope{Channel: *channel, Account: accountOf(*account), Workspace: *workspace, Chat: *chat}, tools, names); err != nil {
		return err
	}
	if len(notes) > 0 {
		fmt.Fprintf(e.stdout, "\nNOTES (MCP servers asked for their tools, waiting at most %s)\n", *wait)
		for _, n := range notes {
			fmt.Fprintf(e.stdout, "  %s\n", n)
		}
	}
	return nil
}

// accountOf is the Scope.Account of the --account flag: "" for the
// section's own app, however it is named.
func accountOf(flag string) string {
	if flag == channels.DefaultAccount {
		return ""
	}
	return flag
}
