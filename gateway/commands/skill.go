package commands

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/skills"
)

// Skills is the gateway's handle on the skill system.
type Skills struct {
	Registry *skills.Registry
	State    skills.State
	// Reload re-scans every layer here and tells the other replicas to do
	// the same. Nil: reload this replica only.
	Reload func(ctx context.Context) (*skills.Catalog, error)
}

// SkillSets gives what a conversation sees of the skills (the gateway's
// view for a turn).
type SkillSets interface {
	Set(ctx context.Context, eff *policy.Effective) *agent.SkillSet
}

// skillCommand is /skill and its sub-commands.
type skillCommand struct {
	skills  *Skills // nil on a bot without skills
	sets    SkillSets
	metrics *metrics.Metrics
	log     *slog.Logger
}

// skillCommand answers /skill … (admins).
//
// Who may run what follows the reach of the change: listing and showing
// the skills this conversation sees is for the conversation's admins (or a
// global one); turning a skill on or off, trusting one and reloading change
// the skills of every platform, chat and replica, so they need an admin
// named in policies.default.admins.
func (s *skillCommand) run(ctx context.Context, c *Call) (string, error) {
	return s.answer(ctx, c.Msg, c.Eff, c.Args), nil
}

func (s *skillCommand) answer(ctx context.Context, m channels.Message, eff *policy.Effective, args string) string {
	global := eff.IsGlobalAdmin(m.User)
	g, sk := s, s.skills
	if sk == nil || sk.Registry == nil {
		return "Skills are not configured on this bot."
	}
	sub, rest := splitWord(args)
	name, _ := splitWord(rest)
	switch sub {
	case "on", "off", "trust", "reload":
		if !global {
			g.metrics.PolicyDenials.WithLabelValues(m.Channel, "admin").Inc()
			g.log.Info("audit: global skill command refused to a conversation admin", "command", sub, "user", m.User, "channel", m.Channel)
			return fmt.Sprintf("Sorry, `/skill %s` changes the skills of every chat on every platform, so only a global administrator (policies.default.admins) can run it. `/skill list` and `/skill show` work for you here.", sub)
		}
	}
	set := g.sets.Set(ctx, eff)
	switch sub {
	case "", "list":
		return listSkills(set, name)
	case "show":
		s, ok := set.Catalog.Get(name)
		if !ok {
			return fmt.Sprintf("No skill named %q.", name)
		}
		return describeSkill(set, s)
	case "on", "off":
		if _, ok := set.Catalog.Get(name); !ok {
			return fmt.Sprintf("No skill named %q.", name)
		}
		if sk.State == nil {
			return "Skill state is not configured on this bot."
		}
		if err := sk.State.SetDisabled(ctx, name, sub == "off"); err != nil {
			g.log.Error("skills: set disabled", "skill", name, "err", err)
			return "Sorry, I could not save that change. Please try again."
		}
		g.log.Info("audit: skill state changed", "skill", name, "state", sub, "user", m.User, "channel", m.Channel)
		if sub == "off" {
			return fmt.Sprintf("Skill %s is now disabled (from the next message on).", name)
		}
		return fmt.Sprintf("Skill %s is now enabled (from the next message on).", name)
	case "trust":
		s, ok := set.Catalog.Get(name)
		if !ok {
			return fmt.Sprintf("No skill named %q.", name)
		}
		if !s.NeedsTrust() {
			return fmt.Sprintf("Skill %s is a %s skill; only workspace skills need trust.", name, s.Source)
		}
		if sk.State == nil {
			return "Skill state is not configured on this bot."
		}
		if err := sk.State.Trust(ctx, s.Path, s.SHA256); err != nil {
			g.log.Error("skills: trust", "skill", name, "err", err)
			return "Sorry, I could not save that change. Please try again."
		}
		g.log.Info("audit: skill trusted", "skill", name, "sha256", s.SHA256, "user", m.User, "channel", m.Channel)
		return fmt.Sprintf("Skill %s is trusted as it is now (sha256 %s…). Any change to its SKILL.md makes it untrusted again.", name, s.SHA256[:12])
	case "reload":
		reload := sk.Reload
		if reload == nil {
			reload = func(context.Context) (*skills.Catalog, error) { return sk.Registry.Reload() }
		}
		c, err := reload(ctx)
		if err != nil {
			g.log.Error("skills: reload", "err", err)
			return "Reload failed; the previous skills stay in use. The logs say why."
		}
		return fmt.Sprintf("Reloaded: %s, in use from the next message on.", countSkills(c.Len()))
	}
	return "Usage: /skill list [PAGE] | show NAME | on NAME | off NAME | trust NAME | reload"
}

// countSkills is "1 skill", "2 skills".
func countSkills(n int) string {
	if n == 1 {
		return "1 skill"
	}
	return fmt.Sprintf("%d skills", n)
}

// skillsPerPage bounds one page of /skill list: a chat message, not a
// wall of text (a library may hold hundreds of skills).
const skillsPerPage = 25

// listSkills lists one page of the skills; page is "" for the first.
func listSkills(set *agent.SkillSet, page string) string {
	all := set.Catalog.All()
	if len(all) == 0 {
		return "No skills are installed."
	}
	pages := (len(all) + skillsPerPage - 1) / skillsPerPage
	p := 1
	if page != "" {
		n, err := strconv.Atoi(page)
		if err != nil || n < 1 || n > pages {
			return fmt.Sprintf("There is no page %q: the list has %d %s (`/skill list 1` to `/skill list %d`).", page, pages, plural(pages, "page", "pages"), pages)
		}
		p = n
	}
	var b strings.Builder
	if pages == 1 {
		fmt.Fprintf(&b, "%s:\n", countSkills(len(all)))
	} else {
		first, last := (p-1)*skillsPerPage, min(p*skillsPerPage, len(all))
		fmt.Fprintf(&b, "%s, %d–%d shown (page %d of %d", countSkills(len(all)), first+1, last, p, pages)
		if p < pages {
			fmt.Fprintf(&b, "; `/skill list %d` for the next", p+1)
		}
		b.WriteString("):\n")
		all = all[first:last]
	}
	for _, s := range all {
		fmt.Fprintf(&b, "- %s (%s", s.Name, s.Source)
		if s.Replaced != "" {
			fmt.Fprintf(&b, ", replaces %s", s.Replaced)
		}
		fmt.Fprintf(&b, ", %s)", skillState(set, s))
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

func skillState(set *agent.SkillSet, s *skills.Skill) string {
	var parts []string
	_, problem := set.Lookup(s.Name)
	switch problem {
	case "":
		parts = append(parts, "enabled")
	case "denied":
		parts = append(parts, "hidden here by policy")
	default:
		parts = append(parts, problem)
	}
	if s.NeedsTrust() {
		if set.IsTrusted(s) {
			parts = append(parts, "trusted")
		} else {
			parts = append(parts, "untrusted")
		}
	}
	if s.DisableModelInvocation {
		parts = append(parts, "manual only")
	}
	if !set.HasTools(s) {
		parts = append(parts, "hidden here: none of its tools is available")
	}
	return strings.Join(parts, ", ")
}

func describeSkill(set *agent.SkillSet, s *skills.Skill) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s — %s\n", s.Name, s.Description)
	fmt.Fprintf(&b, "source: %s; state: %s; body: %d bytes", s.Source, skillState(set, s), s.BodyBytes())
	if s.Version != "" {
		fmt.Fprintf(&b, "; version %s", s.Version)
	}
	if len(s.Tags) > 0 {
		fmt.Fprintf(&b, "; tags: %s", strings.Join(s.Tags, ", "))
	}
	if len(s.AllowedTools) > 0 {
		fmt.Fprintf(&b, "; allowed-tools: %s", strings.Join(s.AllowedTools, " "))
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func splitWord(s string) (word, rest string) {
	s = strings.TrimSpace(s)
	word, rest, _ = strings.Cut(s, " ")
	return strings.ToLower(word), strings.TrimSpace(rest)
}
