// Package policy resolves the per-channel policy tree of the configuration
// (config.Policies) into the effective rules of one conversation scope and
// answers, with an explanation, whether a tool or skill may be used, whether a
// user may talk to the bot there, and who administers it.
//
// Levels are consulted from least to most specific:
//
//	builtin default            every tool, skill, user and chat allowed
//	policies.default
//	builtin <platform> default what the platform registered (wechat: tools.write: false)
//	policies.platforms.P
//	policies.platforms.P.workspaces.W
//	policies.platforms.P.workspaces.W.chats.C
//
// Each field (tools.allow, tools.deny, tools.write, skills.allow, skills.deny,
// access.users, access.chats, access.dms, admins, limits.user_per_minute,
// limits.workspace_per_minute, limits.reply_chars, limits.reply_posts,
// budget.tokens_per_user_day, model, tools.approve, tools.approve_writes,
// approvers.users, approvers.requester, approval_timeout) is taken from the
// most specific level that sets it; lists are replaced, never merged, so an
// operator can read one level and know the whole rule.
//
// A Resolver is immutable after New and safe for concurrent use.
package policy

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley/config"
)

// Level names that are not config keys.
const (
	// LevelBuiltin is the implicit level below everything in the config.
	LevelBuiltin = "builtin default"
	// levelConfigDefault is the config key of the global default.
	levelConfigDefault = "policies.default"
)

// Rule strings of decisions that no configured list made.
const (
	RuleDefaultAllowed  = "default: allowed"
	RuleDefaultEveryone = "default: everyone"
)

// Scope names one conversation's place in the policy tree. Workspace is the
// Slack team, Feishu tenant or WeChat account; Chat the channel, group or
// user. Empty parts are allowed; they are looked up literally.
type Scope struct {
	Channel   string
	Workspace string
	Chat      string
}

// ToolInfo describes a tool for Explain.
type ToolInfo struct {
	Name   string
	Writes bool
	// Source is where the tool comes from, e.g. "mcp:github"; empty means
	// SourceBuiltin.
	Source string
}

// SourceBuiltin is the source of the tools compiled into Parley.
const SourceBuiltin = "builtin"

// Decision is the answer to one policy question together with the rule that
// decided it and the level that rule came from, so that an operator (and a
// refusal message) can point at the exact line of config to change.
type Decision struct {
	Allowed bool
	// Rule is e.g. `tools.deny "save_*"`, "tools.write: false",
	// "not in tools.allow" or "default: allowed".
	Rule string
	// Level is e.g. "policies.platforms.wechat",
	// "builtin wechat default" or
	// "policies.platforms.slack.workspaces.T1.chats.C1".
	Level string
}

// Resolver resolves scopes against one policy tree.
type Resolver struct {
	p config.Policies
	// platforms are the registered platforms' builtin levels (nil: none),
	// by name; a name that is missing is not a platform.
	platforms map[string]*config.Level
	// models describes each model key for Explain (nil: keys only).
	models map[string]string
}

// WithModels returns a copy of r whose Explain describes each model by
// key (see config.Endpoint.Describe).
func (r *Resolver) WithModels(describe map[string]string) *Resolver {
	c := *r
	c.models = maps.Clone(describe)
	return &c
}

// New returns a Resolver for p and the platforms registered with config
// (config.RegisterPlatform), each with its builtin level. p is copied, so
// later changes to the caller's maps and slices cannot change its
// decisions. Patterns are expected to have passed config validation; a
// malformed glob matches only its own exact text.
func New(p config.Policies) *Resolver {
	r := &Resolver{p: clonePolicies(p), platforms: map[string]*config.Level{}}
	for _, pl := range config.Platforms() {
		var builtin *config.Level
		if pl.Policy != nil {
			l := cloneLevel(*pl.Policy)
			builtin = &l
		}
		r.platforms[pl.Name] = builtin
	}
	return r
}

// isPlatform reports whether name is a registered platform.
func (r *Resolver) isPlatform(name string) bool {
	_, ok := r.platforms[name]
	return ok
}

// platformNames lists the registered platforms, sorted.
func (r *Resolver) platformNames() []string {
	return slices.Sorted(maps.Keys(r.platforms))
}

// level is one consulted level of the tree.
type level struct {
	name string
	cfg  config.Level
}

// chain returns the levels that apply to s, least specific first, and the
// names of the levels s would consult that the config does not have (for
// Explain). Unknown platforms get only the default levels, so a new adapter
// never panics or silently inherits another platform's rules.
func (r *Resolver) chain(s Scope) (levels []level, missing []string) {
	levels = append(levels, level{name: LevelBuiltin})
	levels = append(levels, level{name: levelConfigDefault, cfg: r.p.Default})
	if builtin := r.platforms[s.Channel]; builtin != nil {
		// Above the global default, so a global rule written with other
		// platforms in mind does not reach it; below the platform's own
		// section, which can still change it.
		levels = append(levels, level{name: builtinName(s.Channel), cfg: *builtin})
	}
	if !r.isPlatform(s.Channel) {
		return levels, nil
	}

	pname := "policies.platforms." + keySegment(s.Channel)
	pp, ok := r.p.Platforms[s.Channel]
	if !ok {
		missing = append(missing, pname)
	} else {
		levels = append(levels, level{name: pname, cfg: pp.Level})
	}
	if s.Workspace == "" && s.Chat == "" {
		return levels, missing
	}

	wname := pname + ".workspaces." + keySegment(s.Workspace)
	wp, ok := pp.Workspaces[s.Workspace]
	if !ok {
		missing = append(missing, wname)
	} else {
		levels = append(levels, level{name: wname, cfg: wp.Level})
	}
	if s.Chat == "" {
		return levels, missing
	}

	cname := wname + ".chats." + keySegment(s.Chat)
	cl, ok := wp.Chats[s.Chat]
	if !ok {
		missing = append(missing, cname)
	} else {
		levels = append(levels, level{name: cname, cfg: cl})
	}
	return levels, missing
}

// Resolve returns the effective policy of s. It does a handful of map lookups
// and no copying of lists, cheap enough to call on every turn, so nothing is
// cached and a config reload is just a new Resolver.
func (r *Resolver) Resolve(s Scope) *Effective {
	levels, _ := r.chain(s)
	e := resolve(levels)
	e.channel, e.global = s.Channel, r.p.Default.Admins
	return e
}

// setting is one field's effective value and the level it came from. set is
// false when no level (builtin ones included) set the field.
type setting[T any] struct {
	val   T
	set   bool
	level string
}

// fromList overrides st with v if v is set (non-nil) at level name.
func fromList(st *setting[[]string], v []string, name string) {
	if v != nil {
		*st = setting[[]string]{val: v, set: true, level: name}
	}
}

// fromBool is fromList for the *bool fields.
func fromBool(st *setting[bool], v *bool, name string) {
	if v != nil {
		*st = setting[bool]{val: *v, set: true, level: name}
	}
}

// Effective is the resolved policy of one scope. Its lists are shared with
// the Resolver and must not be modified; accessors return copies.
type Effective struct {
	toolAllow, toolDeny   setting[[]string]
	toolWrite             setting[bool]
	skillAllow, skillDeny setting[[]string]
	users, chats          setting[[]string]
	dms                   setting[bool]
	admins                setting[[]string]
	// channel is the scope's platform: admin ids are matched on it.
	channel string
	// global is policies.default.admins, the admins of state shared by
	// every platform and chat.
	global []string
	// userRate, wsRate, replyChars, replyPosts and tokensDay are limits.*
	// and budget.*.
	userRate, wsRate       setting[int]
	replyChars, replyPosts setting[int]
	tokensDay              setting[int64]
	// model is the model key of the scope's turns.
	model setting[string]
	// toolApprove, approveWrites, approverUsers, approverRequester and
	// approvalTimeout are tools.approve, tools.approve_writes, approvers.*
	// and approval_timeout.
	toolApprove       setting[[]string]
	approveWrites     setting[bool]
	approverUsers     setting[[]string]
	approverRequester setting[bool]
	approvalTimeout   setting[time.Duration]
}

func resolve(levels []level) *Effective {
	e := &Effective{}
	for _, st := range []*setting[[]string]{&e.toolAllow, &e.toolDeny, &e.skillAllow, &e.skillDeny, &e.users, &e.chats, &e.admins, &e.toolApprove, &e.approverUsers} {
		st.level = LevelBuiltin
	}
	e.toolWrite = setting[bool]{val: true, level: LevelBuiltin}
	e.dms = setting[bool]{val: true, level: LevelBuiltin}
	e.userRate.level, e.wsRate.level, e.tokensDay.level = LevelBuiltin, LevelBuiltin, LevelBuiltin
	e.replyChars = setting[int]{val: config.DefaultReplyChars, level: LevelBuiltin}
	e.replyPosts = setting[int]{val: config.DefaultReplyPosts, level: LevelBuiltin}
	e.model = setting[string]{val: config.DefaultModelKey, level: LevelBuiltin}
	e.approveWrites.level = LevelBuiltin
	e.approverRequester = setting[bool]{val: true, level: LevelBuiltin}
	e.approvalTimeout = setting[time.Duration]{val: config.DefaultApprovalTimeout, level: LevelBuiltin}
	for _, l := range levels {
		c := l.cfg
		fromList(&e.toolAllow, c.Tools.Allow, l.name)
		fromList(&e.toolDeny, c.Tools.Deny, l.name)
		fromBool(&e.toolWrite, c.Tools.Write, l.name)
		fromList(&e.skillAllow, c.Skills.Allow, l.name)
		fromList(&e.skillDeny, c.Skills.Deny, l.name)
		fromList(&e.users, c.Access.Users, l.name)
		fromList(&e.chats, c.Access.Chats, l.name)
		fromBool(&e.dms, c.Access.DMs, l.name)
		fromList(&e.admins, c.Admins, l.name)
		fromValue(&e.userRate, c.Limits.UserPerMinute, l.name)
		fromValue(&e.wsRate, c.Limits.WorkspacePerMinute, l.name)
		fromValue(&e.replyChars, c.Limits.ReplyChars, l.name)
		fromValue(&e.replyPosts, c.Limits.ReplyPosts, l.name)
		fromValue(&e.tokensDay, c.Budget.TokensPerUserDay, l.name)
		if c.Model != "" {
			e.model = setting[string]{val: c.Model, set: true, level: l.name}
		}
		fromList(&e.toolApprove, c.Tools.Approve, l.name)
		fromBool(&e.approveWrites, c.Tools.ApproveWrites, l.name)
		fromList(&e.approverUsers, c.Approvers.Users, l.name)
		fromBool(&e.approverRequester, c.Approvers.Requester, l.name)
		fromValue(&e.approvalTimeout, c.ApprovalTimeout, l.name)
	}
	return e
}

// Model returns the model the scope's turns use (config.DefaultModelKey
// or a key of models:) and the level that chose it.
func (e *Effective) Model() Decision {
	return Decision{Allowed: true, Rule: "model: " + e.model.val, Level: e.model.level}
}

// ModelKey is the model the scope's turns use: config.DefaultModelKey or
// a key of models:.
func (e *Effective) ModelKey() string {
	return e.model.val
}

// fromValue is fromList for the numeric fields.
func fromValue[T int | int64 | time.Duration](st *setting[T], v *T, name string) {
	if v != nil {
		*st = setting[T]{val: *v, set: true, level: name}
	}
}

// Limits are the quotas and reply caps of a scope. Zero is no limit.
type Limits struct {
	UserPerMinute      int
	WorkspacePerMinute int
	TokensPerUserDay   int64
	// ReplyChars and ReplyPosts cap one answer's characters and the
	// posts it is sent in.
	ReplyChars int
	ReplyPosts int
}

// Limits returns the quotas and caps in effect (limits.*, budget.*).
func (e *Effective) Limits() Limits {
	return Limits{UserPerMinute: e.userRate.val, WorkspacePerMinute: e.wsRate.val, TokensPerUserDay: e.tokensDay.val,
		ReplyChars: e.replyChars.val, ReplyPosts: e.replyPosts.val}
}

// LimitRule names the rule and level that set the quota that refused a
// message: which is "user", "workspace" or "budget".
func (e *Effective) LimitRule(which string) Decision {
	switch which {
	case "user":
		return Decision{Rule: fmt.Sprintf("limits.user_per_minute: %d", e.userRate.val), Level: e.userRate.level}
	case "workspace":
		return Decision{Rule: fmt.Sprintf("limits.workspace_per_minute: %d", e.wsRate.val), Level: e.wsRate.level}
	}
	return Decision{Rule: fmt.Sprintf("budget.tokens_per_user_day: %d", e.tokensDay.val), Level: e.tokensDay.level}
}

// Tool decides whether the tool name, which writes if writes is true, may be
// offered and called. Deny beats everything; then write tools are dropped
// when tools.write is false; then a set allow list must match.
func (e *Effective) Tool(name string, writes bool) Decision {
	if pat, ok := firstMatch(e.toolDeny.val, name); ok {
		return Decision{Rule: fmt.Sprintf("tools.deny %q", pat), Level: e.toolDeny.level}
	}
	if writes && !e.toolWrite.val {
		return Decision{Rule: "tools.write: false", Level: e.toolWrite.level}
	}
	if d, decided := allowList("tools.allow", e.toolAllow, name); decided {
		return d
	}
	if writes && e.toolWrite.set {
		// Name the level that re-enabled writes: it is the one an operator
		// would look for when a write tool shows up unexpectedly.
		return Decision{Allowed: true, Rule: "tools.write: true", Level: e.toolWrite.level}
	}
	return Decision{Allowed: true, Rule: RuleDefaultAllowed, Level: LevelBuiltin}
}

// Approval reports whether a call of the tool name, which writes if writes
// is true, waits for an approver before it runs, and the rule and level
// that say so (Allowed is true when it needs approval). A tool the policy
// does not allow at all is never asked about: Tool decides first.
func (e *Effective) Approval(name string, writes bool) (needed bool, why Decision) {
	if pat, ok := firstMatch(e.toolApprove.val, name); ok {
		return true, Decision{Allowed: true, Rule: fmt.Sprintf("tools.approve %q", pat), Level: e.toolApprove.level}
	}
	if writes && e.approveWrites.val {
		return true, Decision{Allowed: true, Rule: "tools.approve_writes: true", Level: e.approveWrites.level}
	}
	return false, Decision{Rule: "no approval", Level: LevelBuiltin}
}

// ApprovalTimeout is how long an approval waits for a decision
// (approval_timeout).
func (e *Effective) ApprovalTimeout() time.Duration { return e.approvalTimeout.val }

// MayApprove reports whether user may approve or deny a call that
// requester's message led to: named in approvers.users (matched like
// admins, per platform and exactly), or an admin here when approvers.users
// is unset, or the requester unless approvers.requester is false. The
// empty id may approve nothing.
func (e *Effective) MayApprove(user, requester string) bool {
	if user == "" {
		return false
	}
	if e.approverRequester.val && user == requester {
		return true
	}
	if e.approverUsers.set {
		return matchAdmin(e.approverUsers.val, e.approverUsers.level != levelConfigDefault, e.channel, user)
	}
	return e.IsAdmin(user)
}

// Skill decides whether the skill name may be listed, loaded or invoked.
func (e *Effective) Skill(name string) Decision {
	if pat, ok := firstMatch(e.skillDeny.val, name); ok {
		return Decision{Rule: fmt.Sprintf("skills.deny %q", pat), Level: e.skillDeny.level}
	}
	if d, decided := allowList("skills.allow", e.skillAllow, name); decided {
		return d
	}
	return Decision{Allowed: true, Rule: RuleDefaultAllowed, Level: LevelBuiltin}
}

// allowList applies a set allow list; decided is false when the list is
// unset, which allows everything.
func allowList(key string, st setting[[]string], name string) (d Decision, decided bool) {
	if !st.set {
		return Decision{}, false
	}
	if pat, ok := firstMatch(st.val, name); ok {
		return Decision{Allowed: true, Rule: fmt.Sprintf("%s %q", key, pat), Level: st.level}, true
	}
	// Set but empty lands here too: "allow: []" means nothing is allowed.
	return Decision{Rule: "not in " + key, Level: st.level}, true
}

// firstMatch returns the first pattern of pats that matches name, either
// exactly or as a path.Match glob.
func firstMatch(pats []string, name string) (string, bool) {
	for _, pat := range pats {
		if pat == name {
			return pat, true
		}
		// Config validation rejects malformed globs; if one slips through,
		// the error is treated as no match rather than failing every call.
		if ok, err := path.Match(pat, name); err == nil && ok {
			return pat, true
		}
	}
	return "", false
}

// Access decides whether user may talk to the bot in chat; dm says the
// message is a direct message, to which the chat allowlist does not apply.
// Empty allowlists, set or not, admit everyone, so a more specific level can
// lift a restriction with "users: []".
func (e *Effective) Access(user, chat string, dm bool) Decision {
	if len(e.users.val) > 0 && !slices.Contains(e.users.val, user) {
		return Decision{Rule: "not in access.users", Level: e.users.level}
	}
	if dm && !e.dms.val {
		return Decision{Rule: "access.dms: false", Level: e.dms.level}
	}
	if !dm && len(e.chats.val) > 0 && !slices.Contains(e.chats.val, chat) {
		return Decision{Rule: "not in access.chats", Level: e.chats.level}
	}
	switch {
	case len(e.users.val) > 0:
		return Decision{Allowed: true, Rule: "access.users", Level: e.users.level}
	case !dm && len(e.chats.val) > 0:
		return Decision{Allowed: true, Rule: "access.chats", Level: e.chats.level}
	case dm && e.dms.set:
		return Decision{Allowed: true, Rule: "access.dms: true", Level: e.dms.level}
	}
	return Decision{Allowed: true, Rule: RuleDefaultEveryone, Level: LevelBuiltin}
}

// DMMatters reports whether Access can answer differently for a direct
// message than for a chat message in this scope: access.dms is false, or
// access.chats lists chats (a direct message skips that list). When it
// does not, an adapter need not find out which a message is before the
// access rules are applied (a lookup on the webhook's path, for Slack).
func (e *Effective) DMMatters() bool {
	return !e.dms.val || len(e.chats.val) > 0
}

// IsAdmin reports whether user is an admin of this conversation: named in
// the admins list in effect here, the most specific level that sets one.
// That grants the powers whose effect stays within the conversation's
// scope; state shared beyond it needs IsGlobalAdmin.
//
// Admin ids are matched exactly, never as globs: a pattern that grants
// admin rights by accident is worse than a typo that grants none. They
// are matched per platform: an entry written PLATFORM:ID matches only
// that platform's user ID; a bare ID, under policies.platforms.P, only
// P's user; and a bare ID in policies.default matches nobody, since it
// does not say which platform's user it means. The empty id is never an
// admin.
func (e *Effective) IsAdmin(user string) bool {
	return matchAdmin(e.admins.val, e.admins.level != levelConfigDefault, e.channel, user)
}

// IsGlobalAdmin reports whether user is named in policies.default.admins
// for this conversation's platform: the admins of state shared by every
// platform, chat and replica, such as which skills are on and trusted.
func (e *Effective) IsGlobalAdmin(user string) bool {
	return matchAdmin(e.global, false, e.channel, user)
}

// matchAdmin matches user of platform channel against entries; bare
// entries match only when bare is true (a platform's own list).
func matchAdmin(entries []string, bare bool, channel, user string) bool {
	if user == "" || channel == "" {
		return false
	}
	for _, entry := range entries {
		platform, id := config.SplitAdmin(entry)
		if id != user {
			continue
		}
		if platform == channel || platform == "" && bare {
			return true
		}
	}
	return false
}

// Admins returns a copy of the admin ids in effect; it is empty when there
// are none.
func (e *Effective) Admins() []string {
	return slices.Clone(e.admins.val)
}

func builtinName(platform string) string {
	return "builtin " + platform + " default"
}

// keySegment renders a map key as a path segment that stays unambiguous when
// the key is empty or contains a dot.
func keySegment(k string) string {
	if k == "" || strings.ContainsAny(k, ". \t\"") {
		return fmt.Sprintf("%q", k)
	}
	return k
}

func clonePolicies(p config.Policies) config.Policies {
	out := config.Policies{Default: cloneLevel(p.Default)}
	if p.Platforms == nil {
		return out
	}
	out.Platforms = make(map[string]config.PlatformPolicy, len(p.Platforms))
	for name, pp := range p.Platforms {
		cp := config.PlatformPolicy{Level: cloneLevel(pp.Level)}
		if pp.Workspaces != nil {
			cp.Workspaces = make(map[string]config.WorkspacePolicy, len(pp.Workspaces))
			for ws, wp := range pp.Workspaces {
				cw := config.WorkspacePolicy{Level: cloneLevel(wp.Level)}
				if wp.Chats != nil {
					cw.Chats = make(map[string]config.Level, len(wp.Chats))
					for chat, cl := range wp.Chats {
						cw.Chats[chat] = cloneLevel(cl)
					}
				}
				cp.Workspaces[ws] = cw
			}
		}
		out.Platforms[name] = cp
	}
	return out
}

// cloneLevel deep-copies l, keeping nil (unset) and empty (set to nothing)
// distinct: slices.Clone preserves both.
func cloneLevel(l config.Level) config.Level {
	return config.Level{
		Tools: config.ToolRules{
			Allow:         slices.Clone(l.Tools.Allow),
			Deny:          slices.Clone(l.Tools.Deny),
			Write:         cloneBool(l.Tools.Write),
			Approve:       slices.Clone(l.Tools.Approve),
			ApproveWrites: cloneBool(l.Tools.ApproveWrites),
		},
		Skills: config.SkillRules{
			Allow: slices.Clone(l.Skills.Allow),
			Deny:  slices.Clone(l.Skills.Deny),
		},
		Access: config.Access{
			Users: slices.Clone(l.Access.Users),
			Chats: slices.Clone(l.Access.Chats),
			DMs:   cloneBool(l.Access.DMs),
		},
		Admins: slices.Clone(l.Admins),
		Limits: config.Limits{
			UserPerMinute:      clonePtr(l.Limits.UserPerMinute),
			WorkspacePerMinute: clonePtr(l.Limits.WorkspacePerMinute),
			ReplyChars:         clonePtr(l.Limits.ReplyChars),
			ReplyPosts:         clonePtr(l.Limits.ReplyPosts),
		},
		Budget: config.Budget{TokensPerUserDay: clonePtr(l.Budget.TokensPerUserDay)},
		Model:  l.Model,
		Approvers: config.Approvers{
			Users:     slices.Clone(l.Approvers.Users),
			Requester: cloneBool(l.Approvers.Requester),
		},
		ApprovalTimeout: clonePtr(l.ApprovalTimeout),
	}
}

func clonePtr[T any](v *T) *T {
	if v == nil {
		return nil
	}
	return new(*v)
}

func cloneBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	return new(*b)
}
