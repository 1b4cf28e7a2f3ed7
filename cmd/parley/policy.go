package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/policy"
)

// policyCLI is `parley policy explain`: the effective tools, skills, access
// and admins of one scope, with the config level that decided each.
func (e *environment) policy(args []string) error {
	if len(args) == 0 || args[0] != "explain" {
		return fmt.Errorf("%w: parley policy explain --channel C [--workspace W] [--chat X]", errUsage)
	}
	fs := newFlagSet("policy explain", e.stderr)
	path := configFlag(fs)
	channel := fs.String("channel", "", "platform: one of "+strings.Join(config.PlatformNames(), ", "))
	workspace := fs.String("workspace", "", "workspace or tenant id")
	chat := fs.String("chat", "", "chat id")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *channel == "" {
		return fmt.Errorf("%w: --channel is required", errUsage)
	}
	cfg, err := config.Load(*path, e.getenv)
	if err != nil {
		return err
	}
	// The tools are the ones a running bot registers; skills come from the
	// same layers it loads.
	reg := agent.NewRegistry()
	for _, t := range agent.NewSkillTools(agent.SkillToolsConfig{Home: cfg.Home}, nil, nil).Tools() {
		reg.Register(t)
	}
	var tools []policy.ToolInfo
	for _, t := range reg.All() {
		tools = append(tools, policy.ToolInfo{Name: t.Name(), Writes: t.Writes()})
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sreg, _, err := openSkills(cfg, nil, log)
	if err != nil {
		return err
	}
	var names []string
	for _, s := range sreg.Catalog().All() {
		names = append(names, s.Name)
	}
	return policy.New(cfg.Policies).Explain(e.stdout, policy.Scope{Channel: *channel, Workspace: *workspace, Chat: *chat}, tools, names)
}
