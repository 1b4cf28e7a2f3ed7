package main

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/parleyhq/parley/agent"
	agentfiles "github.com/parleyhq/parley/agent/files"
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
	lines, _ := config.ReadLines(*path, e.getenv) // a file that is not read has failed above
	nameProblems, nameWarnings := policyNameProblems(cfg, lines)
	warnings = append(warnings, nameWarnings...)
	var problems []string
	if invalid != nil {
		problems = slices.Clone(invalid.List)
	}
	problems = append(problems, nameProblems...)
	if len(problems) > 0 {
		// Every problem at once, with the warnings, one a line in the
		// file's order: one run to fix the whole file.
		msgs := problems
		for _, w := range warnings {
			msgs = append(msgs, "warning: "+w)
		}
		for _, m := range config.InLineOrder(msgs) {
			fmt.Fprintln(e.stderr, m)
		}
		return fmt.Errorf("invalid config: %s", plural(len(problems), "problem"))
	}
	out, err := cfg.YAML() // every secret prints as <secret>
	if err != nil {
		return fmt.Errorf("render config: %w", err)
	}
	e.stdout.Write(out)
	printProfiles(e.stdout, cfg)
	printAccounts(e.stdout, cfg)
	for _, w := range warnings {
		fmt.Fprintf(e.stderr, "warning: %s\n", w)
	}
	return nil
}

// policyNames checks the policies of a configuration serve is to run:
// a name in a deny or approve list that matches nothing is a problem
// (see policyNameProblems), so serve refuses what config check refuses,
// with the same words.
func policyNames(cfg config.Config, path string, getenv func(string) string) error {
	lines, err := config.ReadLines(path, getenv)
	if err != nil {
		return err
	}
	problems, _ := policyNameProblems(cfg, lines)
	if len(problems) == 0 {
		return nil
	}
	return &config.Invalid{Path: path, List: config.InLineOrder(problems)}
}

// policyNameProblems checks every tool or skill name (or glob) of the
// policy tree, and of skills.index, against what this configuration
// knows. One that matches nothing in tools.deny, tools.approve or
// skills.deny is a problem: the typo denies nothing, so the policy fails
// open. In tools.allow, skills.allow or skills.index it is a warning:
// the typo allows nothing, which fails closed. The tools known are the
// skill tools and what the tool sources know without being opened
// (config check starts nothing): their tools, and any name under a
// prefix of theirs (an MCP server's SERVER__…, whose tools are only
// known once the server answers); the skills are those of the skill
// layers. A profile's skills.allow naming no skill is a problem too. Each
// message names its key, and its line when the file sets it.
func policyNameProblems(cfg config.Config, lines config.Lines) (problems, warnings []string) {
	known := toolsource.KnownNames(cfg)
	tools := known.Tools
	for _, t := range agent.NewSkillTools(agent.SkillToolsConfig{Home: cfg.Home}, nil, nil).Tools() {
		tools = append(tools, t.Name())
	}
	tools = append(tools, agentfiles.SendFileName)
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

	var skillNames []string
	reg, err := skills.NewRegistry(skills.Layers{Builtin: builtin.FS, Home: cfg.Home, Workspace: cfg.Workspace})
	if err != nil {
		warnings = append(warnings, fmt.Sprintf("skill names in policies not checked: %v", err))
	} else {
		for _, s := range reg.Catalog().All() {
			skillNames = append(skillNames, s.Name)
		}
	}
	check := func(out *[]string, key string, names []string, known func(string) bool, what, knownList string) {
		for i, n := range names {
			if known(n) {
				continue
			}
			msg := fmt.Sprintf("%s: %q matches no %s known to this configuration (%s)", key, n, what, knownList)
			if line, ok := lines.Of(fmt.Sprintf("%s[%d]", key, i)); ok {
				msg = fmt.Sprintf("line %d: %s", line, msg)
			}
			*out = append(*out, msg)
		}
	}
	knownSkill := func(pat string) bool { return matchesAny(pat, skillNames) }
	skillsKnown := fmt.Sprintf("%d skills are loaded; parley skills list shows them", len(skillNames))
	for _, l := range policy.FromConfig(cfg).Levels() {
		check(&warnings, l.Key+".tools.allow", l.Level.Tools.Allow, knownTool, "tool", toolsKnown)
		check(&problems, l.Key+".tools.deny", l.Level.Tools.Deny, knownTool, "tool", toolsKnown)
		check(&problems, l.Key+".tools.approve", l.Level.Tools.Approve, knownTool, "tool", toolsKnown)
		if reg != nil {
			check(&warnings, l.Key+".skills.allow", l.Level.Skills.Allow, knownSkill, "skill", skillsKnown)
			check(&problems, l.Key+".skills.deny", l.Level.Skills.Deny, knownSkill, "skill", skillsKnown)
		}
	}
	// A profile is a persona made for its skills: one it names that
	// does not exist is a problem in allow too, not only in deny.
	for _, l := range policy.ProfilesFromConfig(cfg).Levels() {
		check(&warnings, l.Key+".tools.allow", l.Level.Tools.Allow, knownTool, "tool", toolsKnown)
		check(&problems, l.Key+".tools.deny", l.Level.Tools.Deny, knownTool, "tool", toolsKnown)
		check(&problems, l.Key+".tools.approve", l.Level.Tools.Approve, knownTool, "tool", toolsKnown)
		if reg != nil {
			check(&problems, l.Key+".skills.allow", l.Level.Skills.Allow, knownSkill, "skill", skillsKnown)
			check(&problems, l.Key+".skills.deny", l.Level.Skills.Deny, knownSkill, "skill", skillsKnown)
		}
	}
	if reg != nil {
		check(&warnings, "skills.index", cfg.Skills.Index, knownSkill, "skill", skillsKnown)
	}
	return problems, warnings
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
