package main

import (
	"fmt"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/mcp"
	"github.com/parleyhq/parley/agent/web"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/skills"
	"github.com/parleyhq/parley/skills/builtin"
)

// config is `parley config check`: the effective configuration, secrets
// masked, in a form that reads back as the same configuration (see
// config.Names); problems are errors naming key and line, suspect but
// valid settings are warnings on stderr, which leave the exit code 0.
func (e *environment) config(args []string) error {
	if len(args) == 0 || args[0] != "check" {
		return fmt.Errorf("%w: parley config check [--config FILE]", errUsage)
	}
	fs := newFlagSet("config check", e.stderr)
	path := configFlag(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	cfg, warnings, err := config.LoadWithWarnings(*path, e.getenv)
	if err != nil {
		return err
	}
	out, err := cfg.YAML() // every secret prints as <secret>
	if err != nil {
		return fmt.Errorf("render config: %w", err)
	}
	e.stdout.Write(out)
	if err := agent.ModelsFrom(cfg).RequireKey(); err != nil {
		warnings = append(warnings, err.Error())
	}
	// serve starts without them too, with the server down: a warning
	// here, not a refusal, so that check and serve agree.
	warnings = append(warnings, mcpEnvWarnings(cfg, e.getenv)...)
	warnings = append(warnings, policyNameWarnings(cfg)...)
	for _, w := range warnings {
		fmt.Fprintf(e.stderr, "warning: %s\n", w)
	}
	return nil
}

// mcpEnvWarnings names the variables the MCP servers refer to as ${NAME}
// that are not set: those servers cannot connect.
func mcpEnvWarnings(cfg config.Config, getenv func(string) string) []string {
	var out []string
	servers := mcp.FromConfig(cfg).Servers
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		var missing []string
		for _, v := range (mcp.Config{Servers: map[string]mcp.ServerConfig{name: servers[name]}}).EnvVars() {
			if getenv(v) == "" {
				missing = append(missing, v)
			}
		}
		if len(missing) > 0 {
			out = append(out, fmt.Sprintf("tools.mcp.servers.%s: environment variable %s is not set; the server stays down until it is", name, strings.Join(missing, ", ")))
		}
	}
	return out
}

// policyNameWarnings names every tool or skill name (or glob) of the
// policy tree, and of skills.index, that matches nothing this
// configuration knows: a typo there silently allows or denies nothing.
// The tools known are the skill and web tools and, without asking the MCP
// servers (config check starts nothing), any name under a configured
// server's prefix (SERVER__…); the skills are those of the skill layers.
func policyNameWarnings(cfg config.Config) []string {
	var tools []string
	for _, t := range agent.NewSkillTools(agent.SkillToolsConfig{Home: cfg.Home}, nil, nil).Tools() {
		tools = append(tools, t.Name())
	}
	webTools, err := web.Tools(web.FromConfig(cfg), web.Deps{Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		for _, t := range webTools {
			tools = append(tools, t.Name())
		}
	}
	slices.Sort(tools)
	servers := slices.Sorted(maps.Keys(mcp.FromConfig(cfg).Servers))
	knownTool := func(pat string) bool {
		if matchesAny(pat, tools) {
			return true
		}
		for _, s := range servers {
			// Any tool of the server: its tools are only known once it
			// answers, which config check does not wait for.
			if prefix := s + "__"; strings.HasPrefix(pat, prefix) || matchesAny(pat, []string{prefix, prefix + "x"}) {
				return true
			}
		}
		return false
	}
	toolsKnown := strings.Join(tools, ", ")
	for _, s := range servers {
		toolsKnown += ", " + s + "__*"
	}

	var out []string
	var skillNames []string
	reg, err := skills.NewRegistry(skills.Layers{Builtin: builtin.FS, Home: cfg.Home, Workspace: cfg.Workspace})
	if err != nil {
		out = append(out, fmt.Sprintf("skill names in policies not checked: %v", err))
	} else {
		for _, s := range reg.Catalog().All() {
			skillNames = append(skillNames, s.Name)
		}
	}
	check := func(key string, names []string, known func(string) bool, what, knownList string) {
		for _, n := range names {
			if !known(n) {
				out = append(out, fmt.Sprintf("%s: %q matches no %s known to this configuration (%s)", key, n, what, knownList))
			}
		}
	}
	knownSkill := func(pat string) bool { return matchesAny(pat, skillNames) }
	skillsKnown := fmt.Sprintf("%d skills are loaded; parley skills list shows them", len(skillNames))
	for _, l := range policyLevels(*policy.FromConfig(cfg)) {
		check(l.key+".tools.allow", l.level.Tools.Allow, knownTool, "tool", toolsKnown)
		check(l.key+".tools.deny", l.level.Tools.Deny, knownTool, "tool", toolsKnown)
		check(l.key+".tools.approve", l.level.Tools.Approve, knownTool, "tool", toolsKnown)
		if reg != nil {
			check(l.key+".skills.allow", l.level.Skills.Allow, knownSkill, "skill", skillsKnown)
			check(l.key+".skills.deny", l.level.Skills.Deny, knownSkill, "skill", skillsKnown)
		}
	}
	if reg != nil {
		check("skills.index", cfg.Skills.Index, knownSkill, "skill", skillsKnown)
	}
	return out
}

// matchesAny reports whether pat, a name or a glob, matches one of names.
func matchesAny(pat string, names []string) bool {
	for _, n := range names {
		if ok, err := path.Match(pat, n); pat == n || (err == nil && ok) {
			return true
		}
	}
	return false
}

type keyedLevel struct {
	key   string
	level config.Level
}

// policyLevels lists every level of the tree with its key, in a stable
// order.
func policyLevels(p policy.Config) []keyedLevel {
	out := []keyedLevel{{"policies.default", p.Default}}
	for _, name := range slices.Sorted(maps.Keys(p.Platforms)) {
		pp := p.Platforms[name]
		key := "policies.platforms." + name
		out = append(out, keyedLevel{key, pp.Level})
		for _, ws := range slices.Sorted(maps.Keys(pp.Workspaces)) {
			wp := pp.Workspaces[ws]
			wkey := key + ".workspaces." + ws
			out = append(out, keyedLevel{wkey, wp.Level})
			for _, chat := range slices.Sorted(maps.Keys(wp.Chats)) {
				out = append(out, keyedLevel{wkey + ".chats." + chat, wp.Chats[chat]})
			}
		}
	}
	return out
}
