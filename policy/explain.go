package policy

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Explain writes a report of the effective policy of s for an operator
// (`parley policy explain`): the levels consulted, the decision on each of
// tools and skills with the rule and level that made it, who may talk to the
// bot and who administers it. tools and skills are not modified.
func (r *Resolver) Explain(w io.Writer, s Scope, tools []ToolInfo, skills []string) error {
	levels, missing := r.chain(s)
	e := resolve(levels)
	e.channel, e.global = s.Channel, r.p.Default.Admins

	// tabwriter reports write errors only through the calls that happen to
	// flush; remembering the first one here means no Fprintf result needs
	// checking and a failed write is never reported as success.
	ew := &errWriter{w: w}
	tw := tabwriter.NewWriter(ew, 0, 8, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format, args...) }

	r.explainLevels(p, s, levels, missing)
	explainTools(p, e, tools)
	explainSkills(p, e, skills)
	explainAccess(p, e)
	explainApprovals(p, e, tools)
	explainLimits(p, e)
	explainContext(p, e)
	p("\nMODEL\n")
	model := e.model.val
	if d, ok := r.models[model]; ok {
		model += " (" + d + ")"
	}
	p("  %s\t%s\n", model, e.model.level)

	if err := tw.Flush(); err != nil && ew.err == nil {
		return fmt.Errorf("policy explain: %w", err)
	}
	if ew.err != nil {
		return fmt.Errorf("policy explain: %w", ew.err)
	}
	return nil
}

// explainLevels writes the scope and the levels consulted for it.
func (r *Resolver) explainLevels(p func(string, ...any), s Scope, levels []level, missing []string) {
	p("Policy for %s\n", describeScope(s))
	names := make([]string, len(levels))
	for i, l := range levels {
		names[i] = l.name
	}
	p("Levels consulted (later wins): %s\n", strings.Join(names, " < "))
	if !r.isPlatform(s.Channel) {
		p("Channel %q is not a known platform (%s): only the default levels apply.\n", s.Channel, strings.Join(r.platformNames(), ", "))
	}
	if len(missing) > 0 {
		p("Not in config (nothing set there): %s\n", strings.Join(missing, ", "))
	}
}

// explainTools writes the tool rules and the decision on each tool.
func explainTools(p func(string, ...any), e *Effective, tools []ToolInfo) {
	p("\nTOOLS  allow: %s  deny: %s  write: %s\n",
		describeAllow(e.toolAllow), describeDeny(e.toolDeny), describeWrite(e.toolWrite))
	if len(tools) == 0 {
		p("  (no tools given)\n")
		return
	}
	p("  TOOL\tSOURCE\tKIND\tDECISION\tRULE\tLEVEL\n")
	sorted := slices.SortedFunc(slices.Values(tools), func(a, b ToolInfo) int {
		// A name twice is a class placeholder (SERVER__* as read,
		// then as write): read first.
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(boolInt(a.Writes), boolInt(b.Writes)))
	})
	for _, t := range sorted {
		kind := "read"
		if t.Writes {
			kind = "write"
		}
		source := cmp.Or(t.Source, SourceBuiltin)
		d := e.Offer(t)
		p("  %s\t%s\t%s\t%s\t%s\t%s\n", t.Name, source, kind, verdict(d), d.Rule, d.Level)
	}
}

// explainSkills writes the skill rules and the decision on each skill.
func explainSkills(p func(string, ...any), e *Effective, skills []string) {
	p("\nSKILLS  allow: %s  deny: %s\n", describeAllow(e.skillAllow), describeDeny(e.skillDeny))
	if len(skills) == 0 {
		p("  (no skills given)\n")
		return
	}
	p("  SKILL\tDECISION\tRULE\tLEVEL\n")
	for _, name := range slices.Sorted(slices.Values(skills)) {
		d := e.Skill(name)
		p("  %s\t%s\t%s\t%s\n", name, verdict(d), d.Rule, d.Level)
	}
}

// explainAccess writes who may talk to the bot, who administers it here,
// and the global admins of this platform.
func explainAccess(p func(string, ...any), e *Effective) {
	p("\nACCESS\n")
	p("  users\t%s\t%s\n", describeAccessList(e.users, "everyone"), e.users.level)
	p("  chats\t%s\t%s\n", describeAccessList(e.chats, "every chat"), e.chats.level)
	p("  dms\t%s\t%s\n", describeDMs(e.dms), e.dms.level)

	p("\nADMINS\n")
	admins := "none"
	if len(e.admins.val) > 0 {
		admins = strings.Join(e.admins.val, ", ")
	}
	p("  %s\t%s\n", admins, e.admins.level)
	// The global admins of this platform: those IsGlobalAdmin accepts.
	var global []string
	for _, a := range e.global {
		if platform, id := SplitAdmin(a); platform == e.channel && id != "" {
			global = append(global, id)
		}
	}
	globals := "none"
	if len(global) > 0 {
		globals = strings.Join(global, ", ")
	}
	p("\nGLOBAL ADMINS (skills on, off, trust, reload)\n")
	p("  %s\t%s\n", globals, levelConfigDefault)
}

// explainLimits writes the rate limits, the token budget and the reply
// limits.
func explainLimits(p func(string, ...any), e *Effective) {
	p("\nLIMITS\n")
	p("  limits.user_per_minute\t%s\t%s\n", describeLimit(e.userRate.val), e.userRate.level)
	p("  limits.workspace_per_minute\t%s\t%s\n", describeLimit(e.wsRate.val), e.wsRate.level)
	p("  budget.tokens_per_user_day\t%s\t%s\n", describeLimit(e.tokensDay.val), e.tokensDay.level)
	p("  limits.reply_chars\t%s\t%s\n", describeLimit(e.replyChars.val), e.replyChars.level)
	p("  limits.reply_posts\t%s\t%s\n", describeLimit(e.replyPosts.val), e.replyPosts.level)
}

// explainContext writes what a turn reads of its room.
func explainContext(p func(string, ...any), e *Effective) {
	p("\nCONTEXT (the room read before answering)\n")
	thread := "read"
	if !e.ctxThread.val {
		thread = "not read"
	}
	p("  context.thread\t%s\t%s\n", thread, e.ctxThread.level)
	recent := "none"
	if e.ctxRecent.val > 0 {
		recent = fmt.Sprintf("%d messages before a top-level mention", e.ctxRecent.val)
	}
	p("  context.recent\t%s\t%s\n", recent, e.ctxRecent.level)
	p("  context.max_messages\t%d\t%s\n", e.ctxMaxMessages.val, e.ctxMaxMessages.level)
	p("  context.max_bytes\t%d\t%s\n", e.ctxMaxBytes.val, e.ctxMaxBytes.level)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func describeScope(s Scope) string {
	var b strings.Builder
	fmt.Fprintf(&b, "channel %q", s.Channel)
	if s.Workspace != "" || s.Chat != "" {
		fmt.Fprintf(&b, ", workspace %q", s.Workspace)
	}
	if s.Chat != "" {
		fmt.Fprintf(&b, ", chat %q", s.Chat)
	}
	return b.String()
}

func verdict(d Decision) string {
	if d.Allowed {
		return "allowed"
	}
	return "DENIED"
}

func describeAllow(st setting[[]string]) string {
	switch {
	case !st.set:
		return "all (" + st.level + ")"
	case len(st.val) == 0:
		return "[] = nothing (" + st.level + ")"
	}
	return strings.Join(st.val, ", ") + " (" + st.level + ")"
}

func describeDeny(st setting[[]string]) string {
	if len(st.val) == 0 {
		return "none (" + st.level + ")"
	}
	return strings.Join(st.val, ", ") + " (" + st.level + ")"
}

func describeWrite(st setting[bool]) string {
	return fmt.Sprintf("%t (%s)", st.val, st.level)
}

func describeAccessList(st setting[[]string], all string) string {
	switch {
	case !st.set:
		return "default: " + all
	case len(st.val) == 0:
		return all + " (set to [])"
	}
	return strings.Join(st.val, ", ")
}

func describeLimit[T int | int64](v T) string {
	if v <= 0 {
		return "none"
	}
	return fmt.Sprint(v)
}

func describeDMs(st setting[bool]) string {
	v := "off"
	if st.val {
		v = "on"
	}
	if !st.set {
		return "default: " + v
	}
	return v
}

// errWriter keeps the first error of the underlying writer and drops
// everything after it.
type errWriter struct {
	w   io.Writer
	err error
}

func (ew *errWriter) Write(p []byte) (int, error) {
	if ew.err != nil {
		return 0, ew.err
	}
	n, err := ew.w.Write(p)
	if err != nil {
		ew.err = err
	}
	return n, err
}

// explainApprovals lists the tools whose calls wait for an approver, and
// who may approve them.
func explainApprovals(p func(string, ...any), e *Effective, tools []ToolInfo) {
	p("\nAPPROVALS  approve: %s  approve_writes: %s  timeout: %s (%s)\n",
		describeDeny(e.toolApprove), describeWrite(e.approveWrites), e.approvalTimeout.val, e.approvalTimeout.level)
	var listed bool
	for _, t := range slices.SortedFunc(slices.Values(tools), func(a, b ToolInfo) int { return cmp.Compare(a.Name, b.Name) }) {
		if !e.Offer(t).Allowed {
			continue
		}
		if needed, why := e.Approval(t.Name, t.Writes); needed {
			if !listed {
				p("  TOOL\tRULE\tLEVEL\n")
				listed = true
			}
			p("  %s\t%s\t%s\n", t.Name, why.Rule, why.Level)
		}
	}
	if !listed {
		p("  (no allowed tool needs approval)\n")
	}
	who := "the admins above"
	if e.approverUsers.set {
		who = "none"
		if len(e.approverUsers.val) > 0 {
			who = strings.Join(e.approverUsers.val, ", ")
		}
	}
	p("  approvers\t%s\t%s\n", who, e.approverUsers.level)
	requester := "may approve their own calls"
	if !e.approverRequester.val {
		requester = "may not approve their own calls"
	}
	p("  requester\t%s\t%s\n", requester, e.approverRequester.level)
}
