package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/skills"
	"github.com/parleyhq/parley/skills/live"
	"github.com/redis/go-redis/v9"
)

// skillsCLI is `parley skills …`: it works on the same layers and state as a
// running bot, without a model.
func (e *environment) skills(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: parley skills list [--json] [--verbose] | show NAME | lint [DIR|SKILL.md] | on NAME | off NAME | trust NAME", errUsage)
	}
	sub := args[0]
	fs := newFlagSet("skills "+sub, e.stderr)
	path := configFlag(fs)
	asJSON := fs.Bool("json", false, "list as JSON")
	verbose := fs.Bool("verbose", false, "show every warning found while loading, not only the skipped skills")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if sub == "lint" {
		return e.lintSkills(*path, fs.Args())
	}
	cfg, err := config.Load(*path, e.getenv)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	var client redis.UniversalClient
	if cfg.Redis.URL != "" {
		client, err = sessions.OpenRedis(e.ctx, cfg.Redis.URL.Reveal(), 0)
		if err != nil {
			return err
		}
		defer client.Close()
	}
	lib, err := live.Open(skillOptions(cfg, client, log))
	if err != nil {
		return err
	}
	if sub == "list" {
		return e.listSkills(lib, cfg.Skills.Index, *asJSON, *verbose)
	}
	c, state := lib.Registry.Catalog(), lib.State
	switch sub {
	case "show", "on", "off", "trust":
	default:
		return fmt.Errorf("%w: unknown skills command %q", errUsage, sub)
	}
	s, err := skillNamed(c, sub, fs.Arg(0))
	if err != nil {
		return err
	}
	switch sub {
	case "show":
		e.showSkill(s)
		return nil
	case "trust":
		return e.trustSkill(s, state)
	}
	if err := state.SetDisabled(e.ctx, s.Name, sub == "off"); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s: %s\n", s.Name, map[string]string{"on": "enabled", "off": "disabled"}[sub])
	return nil
}

// skillNamed is the skill a subcommand names.
func skillNamed(c *skills.Catalog, sub, name string) (*skills.Skill, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: parley skills %s NAME", errUsage, sub)
	}
	s, ok := c.Get(name)
	if !ok {
		return nil, fmt.Errorf("no skill named %q (parley skills list shows them)", name)
	}
	return s, nil
}

// listSkills is `parley skills list`: the summary, or JSON, and what was
// not loaded. What it calls indexed is what the bot-wide system prompt
// holds (untrusted workspace skills never are); the load counts, where
// Redis keeps them, are shown as advice for the pins.
func (e *environment) listSkills(lib *live.Library, pinned []string, asJSON, verbose bool) error {
	set, err := lib.BotSkills(e.ctx)
	if err != nil {
		return err
	}
	index, _ := set.Index()
	listed, _ := set.IndexListing()
	st := skills.SummaryState{Disabled: set.Disabled, Trusted: set.Trusted, Indexed: map[string]bool{}, IndexBytes: len(index), Pinned: pinned}
	for _, n := range listed {
		st.Indexed[n] = true
	}
	if u, ok := lib.State.(skills.Usage); ok {
		if st.Uses, err = u.Uses(e.ctx); err != nil {
			return err
		}
	}
	c := set.Catalog
	if asJSON {
		return writeSkillsJSON(e.stdout, c, st)
	}
	fmt.Fprintln(e.stdout, c.Summary(st))
	e.reportLoadProblems(c, verbose)
	return nil
}

// showSkill is `parley skills show NAME`.
func (e *environment) showSkill(s *skills.Skill) {
	fmt.Fprintf(e.stdout, "name:        %s\nsource:      %s\npath:        %s\ndescription: %s\n", s.Name, s.Source, s.Path, s.Description)
	if s.Replaced != "" {
		fmt.Fprintf(e.stdout, "replaces:    %s\n", s.Replaced)
	}
	if s.Version != "" {
		fmt.Fprintf(e.stdout, "version:     %s\n", s.Version)
	}
	if len(s.AllowedTools) > 0 {
		fmt.Fprintf(e.stdout, "allowed-tools: %s\n", strings.Join(s.AllowedTools, " "))
	}
	body, err := s.ReadBody()
	if err != nil {
		body = "(the body cannot be read: " + err.Error() + ")\n"
	}
	fmt.Fprintf(e.stdout, "sha256:      %s\n\n%s", s.SHA256, body)
}

// trustSkill is `parley skills trust NAME`.
func (e *environment) trustSkill(s *skills.Skill, state skills.State) error {
	if !s.NeedsTrust() {
		fmt.Fprintf(e.stdout, "%s is a %s skill; only workspace skills need trust\n", s.Name, s.Source)
		return nil
	}
	if err := state.Trust(e.ctx, s.Path, s.SHA256); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s: trusted (sha256 %s)\n", s.Name, s.SHA256)
	return nil
}

// reportLoadProblems writes to stderr the skills that were not loaded, each
// with its reason, then either every other warning (verbose) or their count.
func (e *environment) reportLoadProblems(c *skills.Catalog, verbose bool) {
	skipped := c.Skipped()
	if len(skipped) > 0 {
		fmt.Fprintf(e.stderr, "%s skipped:\n", plural(len(skipped), "skill"))
		for _, w := range skipped {
			fmt.Fprintln(e.stderr, "  "+skills.Warning{File: w.File, Line: w.Line, Msg: w.Reason()}.String())
		}
	}
	others := len(c.Warnings()) - len(skipped)
	switch {
	case others == 0:
	case verbose:
		for _, w := range c.Warnings() {
			if !w.Skipped() {
				fmt.Fprintln(e.stderr, "warning: "+w.String())
			}
		}
	default:
		fmt.Fprintf(e.stderr, "%s in loaded skills (--verbose shows them; parley skills lint explains them)\n", plural(others, "warning"))
	}
}

// lintSkills checks the given folders or SKILL.md files, or else the user
// and workspace layers of the configuration, strictly. A layer folder that
// does not exist holds no skills and is not a problem: a fresh install has
// neither.
func (e *environment) lintSkills(path string, dirs []string) error {
	if len(dirs) == 0 {
		cfg, err := config.Load(path, e.getenv)
		if err != nil {
			return err
		}
		for _, d := range []string{skills.UserSkillsDir(cfg.Home), skills.WorkspaceSkillsDir(cfg.Workspace)} {
			if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(e.stdout, "skills lint: %s does not exist (no skills there)\n", d)
				continue
			}
			dirs = append(dirs, d)
		}
	}
	var n int
	for _, d := range dirs {
		for _, w := range skills.Lint(d) {
			fmt.Fprintln(e.stdout, w.String())
			n++
		}
	}
	if n > 0 {
		return fmt.Errorf("skills lint: %d problem(s)", n)
	}
	fmt.Fprintln(e.stdout, "skills lint: no problems")
	return nil
}

type skillJSON struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Source      string `json:"source"`
	Replaced    string `json:"replaces,omitempty"`
	Path        string `json:"path"`
	Enabled     bool   `json:"enabled"`
	Trusted     bool   `json:"trusted"`
	Invocable   bool   `json:"model_invocable"`
	Indexed     bool   `json:"indexed"` // listed in the bot-wide index
	Loads       int64  `json:"loads"`   // counted in Redis; 0 without it
	BodyBytes   int    `json:"body_bytes"`
}

// problemJSON is a file that was skipped, or a warning about a loaded one.
type problemJSON struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// skillsListJSON is `parley skills list --json`: the loaded skills, the
// files skipped with the reason, and the warnings about loaded skills.
type skillsListJSON struct {
	Skills   []skillJSON   `json:"skills"`
	Skipped  []problemJSON `json:"skipped"`
	Warnings []problemJSON `json:"warnings"`
}

func writeSkillsJSON(w io.Writer, c *skills.Catalog, st skills.SummaryState) error {
	out := skillsListJSON{Skills: []skillJSON{}, Skipped: []problemJSON{}, Warnings: []problemJSON{}}
	for _, s := range c.All() {
		out.Skills = append(out.Skills, skillJSON{
			Name: s.Name, Description: s.Description, Source: string(s.Source), Replaced: string(s.Replaced),
			Path: s.Path, Enabled: !st.Disabled[s.Name], Trusted: !s.NeedsTrust() || st.Trusted(s),
			Invocable: !s.DisableModelInvocation, Indexed: st.Indexed[s.Name], Loads: st.Uses[s.Name], BodyBytes: s.BodyBytes(),
		})
	}
	for _, wn := range c.Warnings() {
		if wn.Skipped() {
			out.Skipped = append(out.Skipped, problemJSON{File: wn.File, Line: wn.Line, Message: wn.Reason()})
		} else {
			out.Warnings = append(out.Warnings, problemJSON{File: wn.File, Line: wn.Line, Message: wn.Msg})
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// skillOptions says where cfg's skill library is: its layers, and its
// state in client's Redis (nil: in the home folder).
func skillOptions(cfg config.Config, client redis.UniversalClient, log *slog.Logger) live.Options {
	return live.Options{Home: cfg.Home, Workspace: cfg.Workspace, Index: cfg.Skills.Index, Redis: client, Prefix: cfg.Redis.Prefix, Log: log}
}
