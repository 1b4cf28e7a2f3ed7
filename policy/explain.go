package policy

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Report is the effective policy of a scope in sections, for a page that
// shows it as tables (the console); Explain prints the same as text.
type Report struct {
	Title string   // "Policy for channel slack, workspace T1"
	Notes []string // the levels consulted, what is not in the config
	// Sections in order: TOOLS, SKILLS, ACCESS, ADMINS, GLOBAL ADMINS,
	// APPROVALS, LIMITS, CONTEXT, MODEL, PROFILE.
	Sections []Section
}

// Section is one part of a Report: a title, the settings it is decided by,
// and its tables.
type Section struct {
	Title   string // "TOOLS"
	Summary string // "allow: all (builtin default)  deny: …"; "" when none
	Tables  []Table
}

// Table is rows of cells, with their column names when they have any, or
// a note in their place ("(no tools given)").
type Table struct {
	Columns []string
	Rows    [][]string
	Note    string
}

// Explain writes a report of the effective policy of s for an operator
// (`parley policy explain`): the levels consulted, the decision on each of
// tools and skills with the rule and level that made it, who may talk to the
// bot and who administers it. tools and skills are not modified.
func (r *Resolver) Explain(w io.Writer, s Scope, tools []ToolInfo, skills []string) error {
	rep := r.Report(s, tools, skills)
	// tabwriter reports write errors only through the calls that happen to
	// flush; remembering the first one here means no Fprintf result needs
	// checking and a failed write is never reported as success.
	ew := &errWriter{w: w}
	tw := tabwriter.NewWriter(ew, 0, 8, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format, args...) }
	p("%s\n", rep.Title)
	for _, n := range rep.Notes {
		p("%s\n", n)
	}
	for _, sec := range rep.Sections {
		if sec.Summary != "" {
			p("\n%s  %s\n", sec.Title, sec.Summary)
		} else {
			p("\n%s\n", sec.Title)
		}
		for _, t := range sec.Tables {
			if t.Note != "" {
				p("  %s\n", t.Note)
			}
			if len(t.Columns) > 0 {
				p("  %s\n", strings.Join(t.Columns, "\t"))
			}
			for _, row := range t.Rows {
				p("  %s\n", strings.Join(row, "\t"))
			}
		}
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		return fmt.Errorf("policy explain: %w", err)
	}
	if ew.err != nil {
		return fmt.Errorf("policy explain: %w", ew.err)
	}
	return nil
}

// Report is the effective policy of s in sections (see Explain). tools
// and skills are not modified.
func (r *Resolver) Report(s Scope, tools []ToolInfo, skills []string) Report {
	levels, missing := r.chain(s)
	e := resolve(levels)
	e.channel, e.global = s.Channel, r.p.Default.Admins
	rep := r.explainLevels(s, levels, missing)
	rep.Sections = append(rep.Sections, explainTools(e, tools), explainSkills(e, skills))
	rep.Sections = append(rep.Sections, explainAccess(e)...)
	rep.Sections = append(rep.Sections, explainApprovals(e, tools), explainLimits(e), explainContext(e))
	model := e.model.val
	if d, ok := r.models[model]; ok {
		model += " (" + d + ")"
	}
	rep.Sections = append(rep.Sections, Section{Title: "MODEL", Tables: []Table{{Rows: [][]string{{model, e.model.level}}}}})
	rep.Sections = append(rep.Sections, explainProfile(e))
	return rep
}

// explainLevels is the report's title: the scope and the levels consulted
// for it.
func (r *Resolver) explainLevels(s Scope, levels []level, missing []string) Report {
	rep := Report{Title: "Policy for " + describeScope(s)}
	names := make([]string, len(levels))
	for i, l := range levels {
		names[i] = l.name
	}
	rep.Notes = append(rep.Notes, "Levels consulted (later wins): "+strings.Join(names, " < "))
	if !r.isPlatform(s.Channel) {
		rep.Notes = append(rep.Notes, fmt.Sprintf("Channel %q is not a known platform (%s): only the default levels apply.", s.Channel, strings.Join(r.platformNames(), ", ")))
	}
	if len(missing) > 0 {
		rep.Notes = append(rep.Notes, "Not in config (nothing set there): "+strings.Join(missing, ", "))
	}
	return rep
}

// explainTools is the tool rules and the decision on each tool.
func explainTools(e *Effective, tools []ToolInfo) Section {
	sec := Section{Title: "TOOLS", Summary: fmt.Sprintf("allow: %s  deny: %s  write: %s  files.send: %s",
		describeAllow(e.toolAllow), describeDeny(e.toolDeny), describeWrite(e.toolWrite), describeFilesSend(e.filesSend))}
	if len(tools) == 0 {
		sec.Tables = []Table{{Note: "(no tools given)"}}
		return sec
	}
	t := Table{Columns: []string{"TOOL", "SOURCE", "KIND", "DECISION", "RULE", "LEVEL"}}
	sorted := slices.SortedFunc(slices.Values(tools), func(a, b ToolInfo) int {
		// A name twice is a class placeholder (SERVER__* as read,
		// then as write): read first.
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(boolInt(a.Writes), boolInt(b.Writes)))
	})
	for _, ti := range sorted {
		kind := "read"
		switch {
		case ti.Writes:
			kind = "write"
		case ti.Sends:
			kind = "send"
		}
		d := e.Offer(ti)
		t.Rows = append(t.Rows, []string{ti.Name, cmp.Or(ti.Source, SourceBuiltin), kind, verdict(d), d.Rule, d.Level})
	}
	sec.Tables = []Table{t}
	return sec
}

// explainSkills is the skill rules and the decision on each skill.
func explainSkills(e *Effective, skills []string) Section {
	sec := Section{Title: "SKILLS", Summary: fmt.Sprintf("allow: %s  deny: %s", describeAllow(e.skillAllow), describeDeny(e.skillDeny))}
	if len(skills) == 0 {
		sec.Tables = []Table{{Note: "(no skills given)"}}
		return sec
	}
	t := Table{Columns: []string{"SKILL", "DECISION", "RULE", "LEVEL"}}
	for _, name := range slices.Sorted(slices.Values(skills)) {
		d := e.Skill(name)
		t.Rows = append(t.Rows, []string{name, verdict(d), d.Rule, d.Level})
	}
	sec.Tables = []Table{t}
	return sec
}

// explainAccess is who may talk to the bot, who administers it here, and
// the global admins of this platform.
func explainAccess(e *Effective) []Section {
	access := Section{Title: "ACCESS", Tables: []Table{{Rows: [][]string{
		{"users", describeAccessList(e.users, "everyone"), e.users.level},
		{"chats", describeAccessList(e.chats, "every chat"), e.chats.level},
		{"dms", describeDMs(e.dms), e.dms.level},
	}}}}
	admins := "none"
	if len(e.admins.val) > 0 {
		admins = strings.Join(e.admins.val, ", ")
	}
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
	return []Section{
		access,
		{Title: "ADMINS", Tables: []Table{{Rows: [][]string{{admins, e.admins.level}}}}},
		{Title: "GLOBAL ADMINS (skills on, off, trust, reload)", Tables: []Table{{Rows: [][]string{{globals, levelConfigDefault}}}}},
	}
}

// explainLimits is the rate limits, the token budget and the reply limits.
func explainLimits(e *Effective) Section {
	return Section{Title: "LIMITS", Tables: []Table{{Rows: [][]string{
		{"limits.user_per_minute", describeLimit(e.userRate.val), e.userRate.level},
		{"limits.workspace_per_minute", describeLimit(e.wsRate.val), e.wsRate.level},
		{"budget.tokens_per_user_day", describeLimit(e.tokensDay.val), e.tokensDay.level},
		{"limits.reply_chars", describeLimit(e.replyChars.val), e.replyChars.level},
		{"limits.reply_posts", describeLimit(e.replyPosts.val), e.replyPosts.level},
	}}}}
}

// explainContext is what a turn reads of its room (context.*).
func explainContext(e *Effective) Section {
	thread := "read"
	if !e.ctxThread.val {
		thread = "not read"
	}
	recent := "none"
	if e.ctxRecent.val > 0 {
		recent = fmt.Sprintf("%d messages before a top-level mention", e.ctxRecent.val)
	}
	return Section{Title: "CONTEXT (the room read before answering)", Tables: []Table{{Rows: [][]string{
		{"context.thread", thread, e.ctxThread.level},
		{"context.recent", recent, e.ctxRecent.level},
		{"context.max_messages", fmt.Sprint(e.ctxMaxMessages.val), e.ctxMaxMessages.level},
		{"context.max_bytes", fmt.Sprint(e.ctxMaxBytes.val), e.ctxMaxBytes.level},
	}}}}
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

// describeFilesSend is files.send as explain shows it: unset, the
// channel's ability decides.
func describeFilesSend(st setting[bool]) string {
	if !st.set {
		return "where the channel can send files (" + st.level + ")"
	}
	return describeWrite(st)
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

// explainApprovals is the tools whose calls wait for an approver, and who
// may approve them.
func explainApprovals(e *Effective, tools []ToolInfo) Section {
	sec := Section{Title: "APPROVALS", Summary: fmt.Sprintf("approve: %s  approve_writes: %s  timeout: %s (%s)",
		describeDeny(e.toolApprove), describeWrite(e.approveWrites), e.approvalTimeout.val, e.approvalTimeout.level)}
	needing := Table{Columns: []string{"TOOL", "RULE", "LEVEL"}}
	for _, t := range slices.SortedFunc(slices.Values(tools), func(a, b ToolInfo) int { return cmp.Compare(a.Name, b.Name) }) {
		if !e.Offer(t).Allowed {
			continue
		}
		if needed, why := e.Approval(t.Name, t.Writes); needed {
			needing.Rows = append(needing.Rows, []string{t.Name, why.Rule, why.Level})
		}
	}
	if len(needing.Rows) == 0 {
		needing = Table{Note: "(no allowed tool needs approval)"}
	}
	who := "the admins above"
	if e.approverUsers.set {
		who = "none"
		if len(e.approverUsers.val) > 0 {
			who = strings.Join(e.approverUsers.val, ", ")
		}
	}
	requester := "may approve their own calls"
	if !e.approverRequester.val {
		requester = "may not approve their own calls"
	}
	sec.Tables = []Table{needing, {Rows: [][]string{
		{"approvers", who, e.approverUsers.level},
		{"requester", requester, e.approverRequester.level},
	}}}
	return sec
}
