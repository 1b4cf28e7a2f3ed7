package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/gateway/commands"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/skills"
)

// Skills is the gateway's handle on the skill system.
type Skills = commands.Skills

// skillSets is what a conversation's turn sees of the skills and tools.
type skillSets struct {
	skills *Skills // nil on a bot without skills
	tools  *agent.Registry
	log    *slog.Logger
	budget int // bytes of skill injections one history may hold
}

// Set fixes what a turn sees of the skills: the catalog of the moment,
// the disabled list, trust, and the conversation's skill policy.
func (g *skillSets) Set(ctx context.Context, eff *policy.Effective) *agent.SkillSet {
	sk := g.skills
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

// invoke prepares a manual /skill:NAME turn: the injection to put
// before the user's text, or a refusal.
func (g *skillSets) invoke(set *agent.SkillSet, history []sessions.Message, name, args string) (preface []sessions.Message, text, refusal string) {
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
	if used+len(inj.Content) > g.budget {
		return nil, "", fmt.Sprintf("Skill %s does not fit: the skills already loaded here use %d of %d bytes. `/compact` or `/reset` frees room.", name, used, g.budget)
	}
	return []sessions.Message{inj}, text, ""
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
func (g *skillSets) availableTools(eff *policy.Effective) []string {
	allow := g.toolPolicy(eff)
	names := []string{}
	for _, t := range g.tools.All() {
		if allow(t.Name()) {
			names = append(names, t.Name())
		}
	}
	return names
}

// toolPolicy is the conversation's tool filter for the agent.
func (g *skillSets) toolPolicy(eff *policy.Effective) func(string) bool {
	return func(name string) bool {
		tool := policy.ToolInfo{Name: name}
		if g.tools != nil {
			if t, ok := g.tools.Get(name); ok {
				tool.Writes, tool.ReadClaimed, tool.Sends = t.Writes(), agent.ReadClaimed(t), agent.Sends(t)
			}
		}
		return eff.Offer(tool).Allowed
	}
}

// Outcomes of compact.
const (
	compactDone    = "ok"
	compactNothing = "nothing"
	compactFailed  = "error"
)

// compactor summarises oversized histories under the conversation lock.
type compactor struct {
	agent   Responder
	store   sessions.Store
	metrics *metrics.Metrics
	log     *slog.Logger
	keep    int // rounds kept verbatim
}

// Force compacts the conversation on request (/compact) and says how it
// went.
func (g *compactor) Force(ctx context.Context, lock *sessions.Lock, channel string) string {
	history, err := g.store.History(ctx, lock.Conversation())
	if err != nil {
		g.log.Error("compact: read history", "err", err)
		return "Sorry, I could not read this conversation. Please try again."
	}
	switch _, outcome := g.compact(ctx, lock, channel, history); outcome {
	case compactNothing:
		return "Nothing to compact yet: this conversation is short enough."
	case compactFailed:
		return "Sorry, I could not compact this conversation just now. Please try again later."
	}
	return "Compacted: the older part of this conversation is now a summary; the latest exchanges are kept as they were."
}

// compactStored is compact for a stored history: decoded only here, and
// encoded again when compaction replaced it.
func (g *compactor) compactStored(ctx context.Context, lock *sessions.Lock, channel string, h sessions.History) sessions.History {
	out, _ := g.replaced(ctx, lock, channel, h)
	return out
}

// forTurn is the agent's TurnRequest.Compact: the stored history h
// compacted when the model refuses a turn as longer than its context.
func (g *compactor) forTurn(lock *sessions.Lock, channel string, h sessions.History) func(context.Context) (sessions.History, bool) {
	return func(ctx context.Context) (sessions.History, bool) { return g.replaced(ctx, lock, channel, h) }
}

// replaced compacts h and returns the history that replaced it, or h and
// false when nothing was compacted.
func (g *compactor) replaced(ctx context.Context, lock *sessions.Lock, channel string, h sessions.History) (sessions.History, bool) {
	msgs, err := h.Messages()
	if err != nil {
		g.log.Warn("compaction skipped: the history does not decode", "err", err)
		return h, false
	}
	compacted, outcome := g.compact(ctx, lock, channel, msgs)
	if outcome != compactDone {
		return h, false
	}
	out, err := sessions.HistoryOf(compacted)
	if err != nil {
		return h, false
	}
	return out, true
}

// compact summarises an oversized history under the conversation lock and
// says what happened. On failure the turn goes on with the whole history: a
// long prompt is better than no answer.
func (g *compactor) compact(ctx context.Context, lock *sessions.Lock, channel string, history []sessions.Message) ([]sessions.Message, string) {
	c, ok, err := g.agent.Compact(ctx, channel, history, g.keep)
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
