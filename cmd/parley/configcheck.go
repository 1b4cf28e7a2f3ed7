package main

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/toolsource"
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
	var invalid *config.Invalid
	if err != nil && !errors.As(err, &invalid) {
		return err // not YAML, or no file: nothing more can be read
	}
	if err := agent.ModelsFrom(cfg).RequireKey(); err != nil {
		warnings = append(warnings, err.Error())
	}
	// What a tool source would need to start: serve starts without it
	// too, so a warning here, not a refusal, and check and serve agree.
	warnings = append(warnings, toolsource.Warnings(cfg, e.getenv)...)
	warnings = append(warnings, policyNameWarnings(cfg)...)
	if invalid != nil {
		// Every problem at once, with the warnings, one a line in the
		// file's order: one run to fix the whole file.
		msgs := slices.Clone(invalid.List)
		for _, w := range warnings {
			msgs = append(msgs, "warning: "+w)
		}
		for _, m := range config.InLineOrder(msgs) {
			fmt.Fprintln(e.stderr, m)
		}
		return fmt.Errorf("invalid config: %s", plural(len(invalid.List), "problem"))
	}
	out, err := cfg.YAML() // every secret prints as <secret>
	if err != nil {
		return fmt.Errorf("render config: %w", err)
	}
	e.stdout.Write(out)
	for _, w := range warnings {
		fmt.Fprintf(e.stderr, "warning: %s\n", w)
	}
	return nil
}

// policyNameWarnings names every tool or skill name (or glob) of the
// policy tree, and of skills.index, that matches nothing this
// configuration knows: a typo there silently allows or denies nothing.
// The tools known are the skill tools and what the tool sources know
// without being opened (config check starts nothing): their tools, and
// any name under a prefix of theirs (an MCP server's SERVER__…); the
// skills are those of the skill layers.
func policyNameWarnings(cfg config.Config) []string {
	known := toolsource.KnownNames(cfg)
	tools := known.Tools
	for _, t := range agent.NewSkillTools(agent.SkillToolsConfig{Home: cfg.Home}, nil, nil).Tools() {
		tools = append(tools, t.Name())
	}
	slices.Sort(tools)
	knownTool := func(pat string) bool {
		if matchesAny(pat, tools) {
			return true
		}
		for _, prefix := range known.Prefixes {
			// Any tool under the prefix: those tools are only known once
			// what serves them answers, which config check does not wait for.
			if strings.HasPrefix(pat, prefix) || matchesAny(pat, []string{prefix, prefix + "x"}) {
				return true
			}
		}
		return false
	}
	toolsKnown := strings.Join(tools, ", ")
	for _, prefix := range known.Prefixes {
		toolsKnown += ", " + prefix + "*"
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
	for _, l := range policy.FromConfig(cfg).Levels() {
		check(l.Key+".tools.allow", l.Level.Tools.Allow, knownTool, "tool", toolsKnown)
		check(l.Key+".tools.deny", l.Level.Tools.Deny, knownTool, "tool", toolsKnown)
		check(l.Key+".tools.approve", l.Level.Tools.Approve, knownTool, "tool", toolsKnown)
		if reg != nil {
			check(l.Key+".skills.allow", l.Level.Skills.Allow, knownSkill, "skill", skillsKnown)
			check(l.Key+".skills.deny", l.Level.Skills.Deny, knownSkill, "skill", skillsKnown)
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
