// Package policy resolves the per-channel policy tree of the configuration
// (Config) into the effective rules of one conversation scope and
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
// A level may choose a profile (profile: NAME, a key of profiles:); the
// most specific level that does decides the scope's profile, and the
// profile's model, tools and skills rules are consulted as a level of
// their own just below the level that chose it (see withProfile).
//
// Each field (tools.allow, tools.deny, tools.write, skills.allow, skills.deny,
// access.users, access.chats, access.dms, admins, limits.user_per_minute,
// limits.workspace_per_minute, limits.reply_chars, limits.reply_posts,
// budget.tokens_per_user_day, model, tools.approve, tools.approve_writes,
// approvers.users, approvers.requester, approval_timeout, context.thread,
// context.recent, context.max_messages, context.max_bytes, profile) is taken from the
// most specific level that sets it; lists are replaced, never merged, so an
// operator can read one level and know the whole rule.
//
// A Resolver is immutable after New and safe for concurrent use.
package policy

import (
	"fmt"
	"maps"
	"slices"
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
	Channel string
	// Account is the platform's app the message came to ("" or
	// "default": the section's own); its level sits between the platform
	// and the workspace.
	Account   string
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
	// ClassRule says what made the tool read or write when its source
	// decides per tool (an MCP server's `read "glob"`, readOnlyHint, …),
	// for Explain; empty for the builtin tools.
	ClassRule string
	// ReadClaimed is true for a read tool whose class is only its
	// source's claim (an MCP server's readOnlyHint, on a server not marked
	// trust_annotations). Where tools.write is false it is not offered: a
	// server that writes while claiming otherwise would bring writes to a
	// channel meant to have none.
	ReadClaimed bool
	// Sends marks a tool of the class send (send_file): it changes
	// nothing outside the chat, so it is no write, and files.send decides
	// whether it is offered.
	Sends bool
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
	p Config
	// platforms are the registered platforms' builtin levels (nil: none),
	// by name; a name that is missing is not a platform.
	platforms map[string]*config.Level
	// models describes each model key for Explain (nil: keys only).
	models map[string]string
	// operator is the user who runs this process on the platform
	// operatorOn (see WithOperator); "" for none.
	operator, operatorOn string
	// profiles are the profiles a level may choose, by name (see
	// WithProfiles).
	profiles map[string]Profile
	// resolved keeps the Effective of each scope resolved: a Resolver
	// never changes, so neither does the answer. Each copy With… makes
	// starts its own.
	resolved *resolvedScopes
}

// WithOperator returns a copy of r in which user, on platform, may run
// the admin commands of every conversation of that platform besides the
// admins the tree names (Effective.IsOperator): the person at the terminal of `parley chat` owns the
// process, its configuration and its store, so nothing the tree could
// refuse them would be kept from them. Global admins stay those of
// policies.default.admins.
func (r *Resolver) WithOperator(platform, user string) *Resolver {
	c := *r
	c.operator, c.operatorOn = user, platform
	c.resolved = new(resolvedScopes)
	return &c
}

// WithModels returns a copy of r whose Explain describes each model by
// key (see agent.Endpoint.Describe, which the binary hands over).
func (r *Resolver) WithModels(describe map[string]string) *Resolver {
	c := *r
	c.models = maps.Clone(describe)
	c.resolved = new(resolvedScopes)
	return &c
}

// New returns a Resolver for p and the platforms registered with config
// (config.RegisterPlatform), each with its builtin level. p is copied, so
// later changes to the caller's maps and slices cannot change its
// decisions. Patterns are expected to have passed config validation; a
// malformed glob matches only its own exact text.
func New(p Config) *Resolver {
	r := &Resolver{p: clonePolicies(p), platforms: map[string]*config.Level{}, resolved: new(resolvedScopes)}
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
	// profile is set on the level a chosen profile adds (see withProfile).
	profile *Chosen
}

// chain returns the levels that apply to s, least specific first, the
// chosen profile's among them, and the names of the levels s would
// consult that the config does not have (for Explain).
func (r *Resolver) chain(s Scope) (levels []level, missing []string) {
	levels, missing = r.tree(s)
	return r.withProfile(levels), missing
}

// tree returns the levels of the tree that apply to s (see chain).
// Unknown platforms get only the default levels, so a new adapter never
// panics or silently inherits another platform's rules.
func (r *Resolver) tree(s Scope) (levels []level, missing []string) {
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
	levels, missing = accountLevel(levels, missing, pname, pp, s.Account)
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

// accountLevel adds the level of s's account to levels, or its name to
// missing. The default account (Account empty) is consulted only when the
// tree has a level for it, so that a tree without accounts explains as it
// always did.
func accountLevel(levels []level, missing []string, pname string, pp PlatformPolicy, account string) ([]level, []string) {
	named := account != ""
	if !named {
		account = defaultAccount
	}
	aname := pname + ".accounts." + keySegment(account)
	if al, ok := pp.Accounts[account]; ok {
		return append(levels, level{name: aname, cfg: al}), missing
	}
	if named {
		missing = append(missing, aname)
	}
	return levels, missing
}

// resolve is Resolve without the memory.
func (r *Resolver) resolve(s Scope) *Effective {
	levels, _ := r.chain(s)
	e := resolve(levels)
	e.channel, e.global = s.Channel, r.p.Default.Admins
	if r.operatorOn != "" && r.operatorOn == s.Channel {
		e.operator = r.operator
	}
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
	// operator is the user who runs the process (see
	// Resolver.WithOperator); "" for none.
	operator string
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
	// ctxThread, ctxRecent, ctxMaxMessages and ctxMaxBytes are context.*.
	ctxThread                              setting[bool]
	ctxRecent, ctxMaxMessages, ctxMaxBytes setting[int]
	// profile is the profile in effect and the level that chose it.
	profile Chosen
	// filesSend is files.send: unset, send_file is offered where the
	// channel can send files.
	filesSend setting[bool]
}

func resolve(levels []level) *Effective {
	e := &Effective{}
	for _, st := range []*setting[[]string]{&e.toolAllow, &e.toolDeny, &e.skillAllow, &e.skillDeny, &e.users, &e.chats, &e.admins, &e.toolApprove, &e.approverUsers} {
		st.level = LevelBuiltin
	}
	e.toolWrite = setting[bool]{val: true, level: LevelBuiltin}
	e.dms = setting[bool]{val: true, level: LevelBuiltin}
	e.userRate.level, e.wsRate.level, e.tokensDay.level = LevelBuiltin, LevelBuiltin, LevelBuiltin
	e.replyChars = setting[int]{val: DefaultReplyChars, level: LevelBuiltin}
	e.replyPosts = setting[int]{val: DefaultReplyPosts, level: LevelBuiltin}
	e.model = setting[string]{val: config.DefaultModelKey, level: LevelBuiltin}
	e.approveWrites.level = LevelBuiltin
	e.approverRequester = setting[bool]{val: true, level: LevelBuiltin}
	e.approvalTimeout = setting[time.Duration]{val: DefaultApprovalTimeout, level: LevelBuiltin}
	e.ctxThread = setting[bool]{val: true, level: LevelBuiltin}
	e.ctxRecent.level = LevelBuiltin
	e.ctxMaxMessages = setting[int]{val: DefaultContextMaxMessages, level: LevelBuiltin}
	e.ctxMaxBytes = setting[int]{val: DefaultContextMaxBytes, level: LevelBuiltin}
	e.filesSend = setting[bool]{val: true, level: LevelBuiltin}
	for _, l := range levels {
		c := l.cfg
		if l.profile != nil {
			e.profile = *l.profile
		}
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
		fromBool(&e.ctxThread, c.Context.Thread, l.name)
		fromValue(&e.ctxRecent, c.Context.Recent, l.name)
		fromValue(&e.ctxMaxMessages, c.Context.MaxMessages, l.name)
		fromValue(&e.ctxMaxBytes, c.Context.MaxBytes, l.name)
		fromBool(&e.filesSend, c.Files.Send, l.name)
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

// Context is what a turn of the scope reads of its room (context.*).
type Context struct {
	// Thread: read the thread before answering in it.
	Thread bool
	// Recent is how many of the chat's messages are read before a
	// top-level mention; 0 reads none.
	Recent int
	// MaxMessages and MaxBytes bound one read, cut from the oldest; 0
	// reads nothing.
	MaxMessages, MaxBytes int
}

// Context returns what a turn reads of the room (context.*).
func (e *Effective) Context() Context {
	return Context{Thread: e.ctxThread.val, Recent: e.ctxRecent.val, MaxMessages: e.ctxMaxMessages.val, MaxBytes: e.ctxMaxBytes.val}
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

// defaultAccount names the account a platform's section itself
// configures (channels.DefaultAccount, which this layer does not import).
const defaultAccount = "default"
