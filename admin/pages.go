package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/audit"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/skills"
)

// notices are the outcomes a change redirects with (?done=CODE&t=TARGET);
// only these texts can appear, so a crafted link cannot put words on a
// page.
var notices = map[string]string{
	"on":        "Skill %s is now enabled (from the next message on, on every replica).",
	"off":       "Skill %s is now disabled (from the next message on, on every replica).",
	"trust":     "Skill %s is trusted as it is now; any change to its SKILL.md makes it untrusted again.",
	"notrust":   "Skill %s is not a workspace skill; only workspace skills need trust.",
	"reload":    "Skills reloaded: %s skills, in use from the next message on.",
	"reset":     "Conversation %s was cleared.",
	"compacted": "Conversation %s was compacted: its older part is now a summary.",
	"nothing":   "Conversation %s is short enough; there was nothing to compact.",
	"busy":      "Conversation %s is answering a message right now; try again in a moment.",
	"unknown":   "There is no skill named %s.",
	"failed":    "That did not work (%s); the log says why.",
}

func notice(r *http.Request) string {
	f, ok := notices[r.URL.Query().Get("done")]
	if !ok {
		return ""
	}
	return fmt.Sprintf(f, r.URL.Query().Get("t"))
}

func doneURL(page, code, target string, extra ...string) string {
	q := url.Values{"done": {code}, "t": {target}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return page + "?" + q.Encode()
}

// ---- overview

type overviewData struct {
	Replicas    []replicaView
	ReplicaErr  string
	Accounts    []accountView
	Redis       redisView
	Inventory   sessions.Inventory
	InvErr      string
	ModelErrors int64
	SkillCount  int
	Disabled    []string
	Grafana     string
	Audit       []audit.Entry
}

type replicaView struct {
	ReplicaInfo
	This bool
	Up   string // how long it has run
	Age  string // since its last beat
}

type redisView struct {
	OK      bool
	Latency string
	Version string
	Memory  string
	Err     string
}

func (s *Server) overview(r *http.Request, id identity, v *view) (string, error) {
	ctx := r.Context()
	v.Title, v.Nav = "Overview", "overview"
	d := &overviewData{Grafana: s.cfg.Admin.GrafanaURL}
	now := s.now()
	reps, err := ListReplicas(ctx, s.cfg.Redis, s.cfg.Prefix)
	if err != nil {
		d.ReplicaErr = "cannot read the replicas from Redis"
		s.log.Warn("admin: overview", "err", err)
	}
	for _, rep := range reps {
		d.ModelErrors += rep.ModelErrors
		d.Replicas = append(d.Replicas, replicaView{ReplicaInfo: rep, This: rep.ID == s.cfg.Replica,
			Up: roundDuration(now.Sub(rep.Started)), Age: roundDuration(now.Sub(rep.Seen))})
	}
	if s.cfg.Accounts != nil {
		d.Accounts = accountViews(s.cfg.Accounts.AccountStates(), reps, s.cfg.Replica)
	}
	d.Redis = s.redisState(ctx)
	if inv, err := s.cfg.Store.Inventory(ctx, 0); err != nil {
		d.InvErr = "cannot read the queues from Redis"
		s.log.Warn("admin: overview", "err", err)
	} else {
		inv.Conversations = nil
		d.Inventory = inv
	}
	c := s.cfg.Skills.Registry.Catalog()
	d.SkillCount = c.Len()
	disabled, err := s.cfg.Skills.State.Disabled(ctx)
	if err != nil {
		return "", err
	}
	for _, sk := range c.All() {
		if disabled[sk.Name] {
			d.Disabled = append(d.Disabled, sk.Name)
		}
	}
	if d.Audit, err = s.ledger.Query(ctx, audit.Filter{Kind: audit.KindAdmin, Since: s.ledger.Retention(), Limit: 10}); err != nil {
		s.log.Warn("admin: overview", "err", err)
	}
	v.Data = d
	return "overview", nil
}

func (s *Server) redisState(ctx context.Context) redisView {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.cfg.Redis.Ping(ctx).Err(); err != nil {
		s.log.Warn("admin: redis ping", "err", err)
		return redisView{Err: "does not answer"}
	}
	rv := redisView{OK: true, Latency: time.Since(start).Round(10 * time.Microsecond).String()}
	if info, err := s.cfg.Redis.Info(ctx, "server", "memory").Result(); err == nil {
		for line := range strings.SplitSeq(info, "\n") {
			k, val, _ := strings.Cut(strings.TrimSpace(line), ":")
			switch k {
			case "redis_version":
				rv.Version = val
			case "used_memory_human":
				rv.Memory = val
			}
		}
	}
	return rv
}

func roundDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return d.Round(time.Minute).String()
	case d < 48*time.Hour:
		return d.Round(time.Hour).String()
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}

// ---- skills

type skillRow struct {
	Name, Description, Source, Replaced, State, Trust string
	Enabled, NeedsTrust, Trusted, ManualOnly          bool
	Bytes                                             int
	Loads                                             int64
}

type skillsData struct {
	Skills   []skillRow
	Warnings []string
	Detail   *skillDetail
}

type skillDetail struct {
	skillRow
	Path, Dir, SHA256, Version, Tags, AllowedTools string
	Body                                           string
	Listing                                        string
	File, FileText, FileErr                        string
	NextOffset                                     int
}

func (s *Server) skillRows(ctx context.Context) ([]skillRow, *skills.Catalog, error) {
	c := s.cfg.Skills.Registry.Catalog()
	disabled, err := s.cfg.Skills.State.Disabled(ctx)
	if err != nil {
		return nil, nil, err
	}
	loads := map[string]int64{}
	if reps, err := ListReplicas(ctx, s.cfg.Redis, s.cfg.Prefix); err == nil {
		for _, rep := range reps {
			for name, n := range rep.SkillLoads {
				loads[name] += n
			}
		}
	}
	var rows []skillRow
	for _, sk := range c.All() {
		row := skillRow{Name: sk.Name, Description: sk.Description, Source: string(sk.Source), Replaced: string(sk.Replaced),
			Enabled: !disabled[sk.Name], NeedsTrust: sk.NeedsTrust(), ManualOnly: sk.DisableModelInvocation,
			Bytes: sk.BodyBytes(), Loads: loads[sk.Name]}
		row.State = "enabled"
		if !row.Enabled {
			row.State = "disabled"
		}
		row.Trust = "not needed"
		if sk.NeedsTrust() {
			ok, err := s.cfg.Skills.State.Trusted(ctx, sk.Path, sk.SHA256)
			if err != nil {
				return nil, nil, err
			}
			row.Trusted = ok
			row.Trust = map[bool]string{true: "trusted", false: "untrusted"}[ok]
		}
		rows = append(rows, row)
	}
	return rows, c, nil
}

func (s *Server) skillsPage(r *http.Request, id identity, v *view) (string, error) {
	ctx := r.Context()
	v.Title, v.Nav = "Skills", "skills"
	rows, c, err := s.skillRows(ctx)
	if err != nil {
		return "", err
	}
	d := &skillsData{Skills: rows}
	for _, w := range c.Warnings() {
		d.Warnings = append(d.Warnings, w.String())
	}
	if name := r.URL.Query().Get("skill"); name != "" {
		sk, ok := c.Get(name)
		if !ok {
			v.Error = "There is no skill named " + name + "."
		} else {
			d.Detail = s.skillDetail(r, sk, rows)
			v.Title = "Skill " + sk.Name
		}
	}
	v.Data = d
	return "skills", nil
}

func (s *Server) skillDetail(r *http.Request, sk *skills.Skill, rows []skillRow) *skillDetail {
	det := &skillDetail{Path: sk.Path, Dir: sk.Dir, SHA256: sk.SHA256, Version: sk.Version,
		Tags: strings.Join(sk.Tags, ", "), AllowedTools: strings.Join(sk.AllowedTools, " ")}
	// The body is on disk until it is shown; a file changed or gone since
	// the catalog was read shows why instead.
	if body, err := sk.ReadBody(); err != nil {
		det.Body = "(the body cannot be shown: " + err.Error() + ")"
	} else {
		det.Body = body
	}
	for _, row := range rows {
		if row.Name == sk.Name {
			det.skillRow = row
		}
	}
	// The files as load_skill(name, file) shows them to the model: the
	// same fence (no symlinks, no escapes) and the user's notes merged.
	if listing, err := skills.ReadFile(sk, s.cfg.Skills.Home, "", 0); err == nil {
		det.Listing = listing
	}
	if file := r.URL.Query().Get("file"); file != "" {
		det.File = file
		offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		text, err := skills.ReadFile(sk, s.cfg.Skills.Home, file, max(offset, 0))
		if err != nil {
			det.FileErr = err.Error()
		} else {
			det.FileText = text
		}
	}
	return det
}

// skillAction is on, off, trust or reload, with the rules of the chat's
// /skill commands.
func (s *Server) skillAction(w http.ResponseWriter, r *http.Request, id identity) (string, int, error) {
	ctx := r.Context()
	action, name := r.PostFormValue("action"), r.PostFormValue("skill")
	back := "/admin/skills"
	if r.PostFormValue("from") == "detail" && name != "" {
		back += "?skill=" + url.QueryEscape(name)
	}
	withDone := func(code, target string) string {
		sep := "?"
		if strings.Contains(back, "?") {
			sep = "&"
		}
		return back + sep + strings.TrimPrefix(doneURL("", code, target), "?")
	}
	switch action {
	case "on", "off":
		sk, ok := s.cfg.Skills.Registry.Catalog().Get(name)
		if !ok {
			return withDone("unknown", name), 0, nil
		}
		if err := s.cfg.Skills.State.SetDisabled(ctx, sk.Name, action == "off"); err != nil {
			s.audit(r, id, "skill "+action, sk.Name, "error")
			return "", 0, err
		}
		s.audit(r, id, "skill "+action, sk.Name, "ok")
		return withDone(action, sk.Name), 0, nil
	case "trust":
		sk, ok := s.cfg.Skills.Registry.Catalog().Get(name)
		if !ok {
			return withDone("unknown", name), 0, nil
		}
		if !sk.NeedsTrust() {
			return withDone("notrust", sk.Name), 0, nil
		}
		if err := s.cfg.Skills.State.Trust(ctx, sk.Path, sk.SHA256); err != nil {
			s.audit(r, id, "skill trust", sk.Name, "error")
			return "", 0, err
		}
		s.audit(r, id, "skill trust", sk.Name+" sha256 "+sk.SHA256, "ok")
		return withDone("trust", sk.Name), 0, nil
	case "reload":
		reload := s.cfg.Skills.Reload
		if reload == nil {
			reload = func(context.Context) (*skills.Catalog, error) { return s.cfg.Skills.Registry.Reload() }
		}
		c, err := reload(ctx)
		if err != nil {
			s.audit(r, id, "skills reload", "", "error")
			s.log.Error("admin: skills reload; the previous skills stay in use", "err", err)
			return doneURL("/admin/skills", "failed", "reload"), 0, nil
		}
		s.audit(r, id, "skills reload", "", "ok")
		return doneURL("/admin/skills", "reload", strconv.Itoa(c.Len())), 0, nil
	}
	return "", http.StatusBadRequest, nil
}

// ---- policies

type policiesData struct {
	Scopes []policy.Scope
	Chosen policy.Scope
	// Report is what parley policy explain prints, in tables; nil until
	// a scope is chosen.
	Report *policy.Report
}

// IsChosen reports whether sc is the scope explained, so that the list of
// conversations seen keeps it selected.
func (d *policiesData) IsChosen(sc policy.Scope) bool { return sc == d.Chosen }

// maxScopes bounds the scopes offered, and the conversations read for them.
const maxScopes = 500

func (s *Server) policiesPage(r *http.Request, id identity, v *view) (string, error) {
	ctx := r.Context()
	v.Title, v.Nav = "Policies", "policies"
	d := &policiesData{}
	inv, err := s.cfg.Store.Inventory(ctx, maxScopes)
	if err != nil {
		return "", err
	}
	seen := map[policy.Scope]bool{}
	for _, c := range inv.Conversations {
		sc := scopeOf(c.Key)
		if !seen[sc] {
			seen[sc] = true
			d.Scopes = append(d.Scopes, sc)
		}
	}
	slices.SortFunc(d.Scopes, func(a, b policy.Scope) int {
		return strings.Compare(a.Channel+"\x00"+a.Workspace+"\x00"+a.Chat, b.Channel+"\x00"+b.Workspace+"\x00"+b.Chat)
	})
	q := r.URL.Query()
	if sc := q.Get("scope"); sc != "" {
		d.Chosen = scopeOf(sc)
	} else {
		d.Chosen = policy.Scope{Channel: q.Get("channel"), Workspace: q.Get("workspace"), Chat: q.Get("chat")}
	}
	if d.Chosen.Channel != "" {
		var names []string
		for _, sk := range s.cfg.Skills.Registry.Catalog().All() {
			names = append(names, sk.Name)
		}
		rep := s.cfg.Policy.Report(d.Chosen, s.cfg.Tools.PolicyTools(), names)
		d.Report = &rep
	}
	v.Data = d
	return "policies", nil
}

// scopeOf is the policy scope of a conversation key
// (channel[/account]:workspace:chat:thread).
func scopeOf(key string) policy.Scope {
	parts := strings.SplitN(key, ":", 4)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	channel, account := channels.SplitAdapterKey(parts[0])
	return policy.Scope{Channel: channel, Account: account, Workspace: parts[1], Chat: parts[2]}
}

// ---- conversations

type conversationsData struct {
	Inventory sessions.Inventory
	ByChannel []channelGroup
	Detail    *conversationDetail
}

type channelGroup struct {
	Channel       string
	Conversations []sessions.ConversationInfo
}

type conversationDetail struct {
	Key      string
	Info     sessions.ConversationInfo
	Messages []messageView
}

// messageView is one history entry as the console shows it: Class says
// what it is (user, assistant, tool-result, injection, summary, system).
type messageView struct {
	Class, Label, Text string
	Calls              []string
}

// maxConversations is how many of the most recent conversations are listed.
const maxConversations = 200

func (s *Server) conversationsPage(r *http.Request, id identity, v *view) (string, error) {
	ctx := r.Context()
	v.Title, v.Nav = "Conversations", "conversations"
	inv, err := s.cfg.Store.Inventory(ctx, maxConversations)
	if err != nil {
		return "", err
	}
	d := &conversationsData{Inventory: inv}
	groups := map[string]int{}
	for _, c := range inv.Conversations {
		ch := scopeOf(c.Key).Channel
		i, ok := groups[ch]
		if !ok {
			i = len(d.ByChannel)
			groups[ch] = i
			d.ByChannel = append(d.ByChannel, channelGroup{Channel: ch})
		}
		d.ByChannel[i].Conversations = append(d.ByChannel[i].Conversations, c)
	}
	slices.SortFunc(d.ByChannel, func(a, b channelGroup) int { return strings.Compare(a.Channel, b.Channel) })
	// A conversation is named as it is shown (sessions.ShownKey) or by
	// its key.
	if key := sessions.KeyOf(r.URL.Query().Get("c")); key != "" {
		det, err := s.conversationDetail(ctx, key, inv)
		if err != nil {
			return "", err
		}
		d.Detail = det
		v.Title = "Conversation " + sessions.ShownKey(key)
	}
	v.Data = d
	return "conversations", nil
}

func (s *Server) conversationDetail(ctx context.Context, key string, inv sessions.Inventory) (*conversationDetail, error) {
	msgs, err := s.cfg.Store.History(ctx, key)
	if err != nil {
		return nil, err
	}
	det := &conversationDetail{Key: key, Info: sessions.ConversationInfo{Key: key, Messages: int64(len(msgs))}}
	for _, c := range inv.Conversations {
		if c.Key == key {
			det.Info = c
		}
	}
	for _, m := range msgs {
		det.Messages = append(det.Messages, viewMessage(m))
	}
	return det, nil
}

// viewMessage tells the kinds of history entries apart the way the agent
// does: injections by their kind or marker, tool results by their
// untrusted envelope.
func viewMessage(m sessions.Message) messageView {
	switch m.Role {
	case "user":
		if name, ok := skills.ParseInjection(m.Content); ok || m.Kind == sessions.KindInjection {
			if name == "" {
				name = "?"
			}
			return messageView{Class: "injection", Label: "Skill injection: " + name, Text: m.Content}
		}
		if m.Kind == sessions.KindSummary {
			return messageView{Class: "summary", Label: "Summary of earlier rounds", Text: m.Content}
		}
		return messageView{Class: "user", Label: "User", Text: m.Content}
	case "assistant":
		v := messageView{Class: "assistant", Label: "Assistant", Text: m.Content}
		if m.Kind == sessions.KindSummary {
			v.Class, v.Label = "summary", "Summary of earlier rounds"
		}
		for _, c := range m.ToolCalls {
			v.Calls = append(v.Calls, c.Name+"("+c.Arguments+")")
		}
		return v
	case "tool":
		if name, content, ok := agent.UnwrapToolResult(m.Content); ok {
			return messageView{Class: "tool-result", Label: "Tool result: " + name + " (untrusted data)", Text: content}
		}
		return messageView{Class: "tool-result", Label: "Tool result (untrusted data)", Text: m.Content}
	}
	return messageView{Class: "system", Label: m.Role, Text: m.Content}
}

// maxKeyLen bounds a conversation key a form may name.
const maxKeyLen = 1024

func (s *Server) conversationAction(w http.ResponseWriter, r *http.Request, id identity) (string, int, error) {
	ctx := r.Context()
	key, action := sessions.KeyOf(r.PostFormValue("c")), r.PostFormValue("action")
	if key == "" || len(key) > maxKeyLen {
		return "", http.StatusBadRequest, nil
	}
	shown := sessions.ShownKey(key)
	back := func(code string) string { return doneURL("/admin/conversations", code, shown, "c", shown) }
	switch action {
	case "reset":
		err := s.cfg.Conversations.ResetConversation(ctx, key)
		if code, ok := busyOrFailed(err); ok {
			s.audit(r, id, "conversation reset", shown, code)
			return back(code), 0, nil
		}
		s.audit(r, id, "conversation reset", shown, "ok")
		return back("reset"), 0, nil
	case "compact":
		outcome, err := s.cfg.Conversations.CompactConversation(ctx, key)
		if code, ok := busyOrFailed(err); ok {
			if code == "failed" {
				s.log.Warn("admin: compact", "conversation", shown, "err", err)
			}
			s.audit(r, id, "conversation compact", shown, code)
			return back(code), 0, nil
		}
		s.audit(r, id, "conversation compact", shown, outcome)
		if outcome == "ok" {
			return back("compacted"), 0, nil
		}
		return back("nothing"), 0, nil
	}
	return "", http.StatusBadRequest, nil
}

// busyOrFailed names the outcome of a failed reset or compaction: a
// conversation whose lock another holder has (a turn is running) is busy.
func busyOrFailed(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	if errors.Is(err, sessions.ErrLocked) {
		return "busy", true
	}
	return "failed", true
}

// ---- tools

type toolsData struct {
	Tools   []ToolStatus
	Servers []serverView
}

type serverView struct {
	Name, State, Error string
	Tools              int
}

func (s *Server) toolsPage(r *http.Request, id identity, v *view) (string, error) {
	v.Title, v.Nav = "Tools", "tools"
	d := &toolsData{Tools: s.cfg.Tools.ToolStatuses()}
	servers := map[string]*serverView{}
	var order []string
	for _, t := range d.Tools {
		name, ok := strings.CutPrefix(t.Source, "mcp:")
		if !ok {
			continue
		}
		sv, ok := servers[name]
		if !ok {
			sv = &serverView{Name: name, State: t.ServerState, Error: t.ServerError}
			servers[name] = sv
			order = append(order, name)
		}
		if t.Class != "" {
			sv.Tools++
		}
	}
	slices.Sort(order)
	for _, n := range order {
		d.Servers = append(d.Servers, *servers[n])
	}
	v.Data = d
	return "tools", nil
}
