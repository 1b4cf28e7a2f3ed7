package gateway

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
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

// skillSet fixes what a turn sees of the skills: the catalog of the moment,
// the disabled list, trust, and the conversation's skill policy.
func (g *Gateway) skillSet(ctx context.Context, eff *policy.Effective) *agent.SkillSet {
	sk := g.cfg.Skills
	if sk == nil || sk.Registry == nil {
		return nil
	}
	set := &agent.SkillSet{
		Catalog: sk.Registry.Catalog(),
		Allowed: func(name string) bool { return eff.Skill(name).Allowed },
		Tools:   g.availableTools(eff),
	}
	if sk.State != nil {
		disabled, err := sk.State.Disabled(ctx)
		if err != nil {
			// Unknown state must not stop the bot; every skill stays on.
			g.log.Warn("skills: cannot read the disabled list; treating every skill as enabled", "err", err)
		}
		set.Disabled = disabled
		if u, ok := sk.State.(skills.Usage); ok {
			set.Used = func(name string) {
				if err := u.CountUse(ctx, name); err != nil {
					g.log.Debug("skills: a load was not counted for the index order", "skill", name, "err", err)
				}
			}
		}
		set.Trusted = func(s *skills.Skill) bool {
			ok, err := sk.State.Trusted(ctx, s.Path, s.SHA256)
			if err != nil {
				g.log.Warn("skills: cannot read trust; treating the skill as untrusted", "skill", s.Name, "err", err)
			}
			return ok
		}
	}
	return set
}

// skillCommand handles /skill … (admins) and reports whether text was one.
//
// Who may run what follows the reach of the change: listing and showing
// the skills this conversation sees is for the conversation's admins (or a
// global one); turning a skill on or off, trusting one and reloading change
// the skills of every platform, chat and replica, so they need an admin
// named in policies.default.admins.
func (g *Gateway) skillCommand(ctx context.Context, m channels.Message, eff *policy.Effective, args string) string {
	global := eff.IsGlobalAdmin(m.User)
	if !global && !eff.IsAdmin(m.User) {
		g.metrics.PolicyDenials.WithLabelValues(m.Channel, "admin").Inc()
		return "Sorry, only an administrator of this bot can manage skills here. `/skill:NAME` to use a skill works for everyone."
	}
	sk := g.cfg.Skills
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
	set := g.skillSet(ctx, eff)
	switch sub {
	case "", "list":
		return g.listSkills(set, name)
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
func (g *Gateway) listSkills(set *agent.SkillSet, page string) string {
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
	fmt.Fprintf(&b, "source: %s; state: %s; body: %d bytes", s.Source, skillState(set, s), len(s.Body))
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

// invokeSkill prepares a manual /skill:NAME turn: the injection to put
// before the user's text, or a refusal.
func (g *Gateway) invokeSkill(set *agent.SkillSet, history []sessions.Message, name, args string) (preface []sessions.Message, text, refusal string) {
	s, problem := set.Lookup(name)
	switch problem {
	case "":
	case "denied":
		return nil, "", fmt.Sprintf("Skill %s is not available in this conversation.", name)
	case "disabled":
		return nil, "", fmt.Sprintf("Skill %s is disabled by an administrator.", name)
	default:
		return nil, "", fmt.Sprintf("No skill named %q. `/skill list` shows them (admins), or just ask.", name)
	}
	if !set.IsTrusted(s) {
		return nil, "", fmt.Sprintf("Skill %s comes from the workspace and is not trusted yet; an administrator can run `/skill trust %s`.", name, name)
	}
	text = args
	if text == "" {
		text = fmt.Sprintf("Use the %s skill.", name)
	}
	loaded, used := agent.InjectedSkills(history)
	if loaded[name] {
		return nil, text, ""
	}
	inj := agent.Injection(s)
	if used+len(inj.Content) > g.cfg.SkillBudget {
		return nil, "", fmt.Sprintf("Skill %s does not fit: the skills already loaded here use %d of %d bytes. `/compact` or `/reset` frees room.", name, used, g.cfg.SkillBudget)
	}
	return []sessions.Message{inj}, text, ""
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

// manualSkill parses "/skill:NAME args".
func manualSkill(text string) (name, args string, ok bool) {
	if len(text) < len("/skill:") || !strings.EqualFold(text[:len("/skill:")], "/skill:") {
		return "", "", false
	}
	name, args, _ = strings.Cut(text[len("/skill:"):], " ")
	return strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(args), true
}

// availableTools names the registered tools the conversation's policy
// allows; skills that require tools are hidden where none is available.
func (g *Gateway) availableTools(eff *policy.Effective) []string {
	allow := g.toolPolicy(eff)
	names := []string{}
	for _, t := range g.cfg.Tools.All() {
		if allow(t.Name()) {
			names = append(names, t.Name())
		}
	}
	return names
}

// toolPolicy is the conversation's tool filter for the agent.
func (g *Gateway) toolPolicy(eff *policy.Effective) func(string) bool {
	return func(name string) bool {
		writes := false
		if g.cfg.Tools != nil {
			if t, ok := g.cfg.Tools.Get(name); ok {
				writes = t.Writes()
			}
		}
		return eff.Tool(name, writes).Allowed
	}
}

// Outcomes of compact.
const (
	compactDone    = "ok"
	compactNothing = "nothing"
	compactFailed  = "error"
)

// compactStored is compact for a stored history: decoded only here, and
// encoded again when compaction replaced it.
func (g *Gateway) compactStored(ctx context.Context, lock *sessions.Lock, channel string, h sessions.History) sessions.History {
	msgs, err := h.Messages()
	if err != nil {
		g.log.Warn("compaction skipped: the history does not decode", "err", err)
		return h
	}
	compacted, outcome := g.compact(ctx, lock, channel, msgs)
	if outcome != compactDone {
		return h
	}
	out, err := sessions.HistoryOf(compacted)
	if err != nil {
		return h
	}
	return out
}

// compact summarises an oversized history under the conversation lock and
// says what happened. On failure the turn goes on with the whole history: a
// long prompt is better than no answer.
func (g *Gateway) compact(ctx context.Context, lock *sessions.Lock, channel string, history []sessions.Message) ([]sessions.Message, string) {
	c, ok, err := g.agent.Compact(ctx, channel, history, g.cfg.KeepRounds)
	if err != nil {
		g.metrics.Compactions.WithLabelValues(channel, compactFailed).Inc()
		g.log.Warn("compaction failed; continuing with the whole history", "err", err)
		return history, compactFailed
	}
	if !ok {
		return history, compactNothing
	}
	if err := g.store.ReplaceHistory(ctx, lock, c.History); err != nil {
		g.metrics.Compactions.WithLabelValues(channel, compactFailed).Inc()
		g.log.Warn("compaction could not be stored", "err", err)
		return history, compactFailed
	}
	g.metrics.Compactions.WithLabelValues(channel, compactDone).Inc()
	g.log.Info("history compacted", "channel", channel, "rounds", c.Rounds, "skills_removed", c.RemovedSkills)
	return c.History, compactDone
}
