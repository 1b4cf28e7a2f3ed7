package config

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"time"
)

// Policies is the policy tree: a global default, then per platform, per
// workspace (Slack team, Feishu tenant, WeChat account) and per chat. The
// policy package resolves it most-specific-first.
//
// Every key of the tree is printed only when it is set (omitempty, with
// Names keeping a set but empty list), so that what `parley config check`
// prints reads back as the same tree: an unset list printed as [] would
// turn "the level above decides" into "nothing" for tools.allow.
type Policies struct {
	Default   Level                     `yaml:"default,omitempty"`
	Platforms map[string]PlatformPolicy `yaml:"platforms,omitempty"`
}

// Names is a list of names or globs in which leaving the key out and
// writing [] differ: nil is "not set here", an empty list is set and
// empty. Under omitempty a nil list is not printed and an empty one is
// printed as [], so both survive a round trip through the file.
type Names []string

// IsZero implements yaml.IsZeroer: only a nil list is left out.
func (n Names) IsZero() bool { return n == nil }

// Level is what any one level of the tree may set. Nil slices and pointers
// mean "not set here": the level above decides.
type Level struct {
	Tools  ToolRules  `yaml:"tools,omitempty"`
	Skills SkillRules `yaml:"skills,omitempty"`
	Access Access     `yaml:"access,omitempty"`
	Admins Names      `yaml:"admins,omitempty"`
	Limits Limits     `yaml:"limits,omitempty"`
	Budget Budget     `yaml:"budget,omitempty"`
	// Model names the model of the scope's turns: DefaultModelKey or a
	// key of models:. Empty leaves it to the level above.
	Model string `yaml:"model,omitempty"`
	// Approvers may decide the approvals this level's tools need.
	Approvers Approvers `yaml:"approvers,omitempty"`
	// ApprovalTimeout is how long an approval waits for a decision before
	// it expires (nil: the level above; DefaultApprovalTimeout).
	ApprovalTimeout *time.Duration `yaml:"approval_timeout,omitempty"`
}

// DefaultApprovalTimeout is how long a tool call waits for an approver
// unless approval_timeout says otherwise.
const DefaultApprovalTimeout = 10 * time.Minute

// Approvers says who may approve or deny a tool call. Users unset means
// the admins in effect at the conversation's level; Requester unset (or
// true) lets the user whose message led to the call decide it too.
type Approvers struct {
	Users     Names `yaml:"users,omitempty"`
	Requester *bool `yaml:"requester,omitempty"`
}

// Limits cap how many messages a minute reach the model, counted over all
// replicas: per user (of one workspace) and per workspace; and how long an
// answer may be: its characters and the posts it is sent in, past which it
// is cut with a note. Zero lifts a limit set at a level above (or the
// builtin default of the reply caps); nil leaves it to that level.
type Limits struct {
	UserPerMinute      *int `yaml:"user_per_minute,omitempty"`
	WorkspacePerMinute *int `yaml:"workspace_per_minute,omitempty"`
	ReplyChars         *int `yaml:"reply_chars,omitempty"`
	ReplyPosts         *int `yaml:"reply_posts,omitempty"`
}

// Builtin reply caps: far above any answer worth reading in a chat, low
// enough that a runaway model cannot flood a channel.
const (
	DefaultReplyChars = 40_000
	DefaultReplyPosts = 10
)

// Budget caps the model tokens (prompt and completion, as the model
// reports them) one user of a workspace may spend in a UTC day. Zero lifts
// a budget set above; nil leaves it to the level above.
type Budget struct {
	TokensPerUserDay *int64 `yaml:"tokens_per_user_day,omitempty"`
}

// ToolRules allow and deny tools by name or glob; deny wins. Write false
// drops every tool that declares it writes.
type ToolRules struct {
	Allow Names `yaml:"allow,omitempty"`
	Deny  Names `yaml:"deny,omitempty"`
	Write *bool `yaml:"write,omitempty"`
	// Approve names (or globs) the tools whose every call waits for an
	// approver; ApproveWrites true does so for every write tool.
	Approve       Names `yaml:"approve,omitempty"`
	ApproveWrites *bool `yaml:"approve_writes,omitempty"`
}

// SkillRules hide skills from the index, load_skill, find_skills and /skill:.
type SkillRules struct {
	Allow Names `yaml:"allow,omitempty"`
	Deny  Names `yaml:"deny,omitempty"`
}

// Access says who may talk to the bot. Empty allowlists allow everyone.
type Access struct {
	Users Names `yaml:"users,omitempty"`
	Chats Names `yaml:"chats,omitempty"`
	DMs   *bool `yaml:"dms,omitempty"`
}

// PlatformPolicy is a Level plus its workspaces.
type PlatformPolicy struct {
	Level      `yaml:",inline"`
	Workspaces map[string]WorkspacePolicy `yaml:"workspaces,omitempty"`
}

// WorkspacePolicy is a Level plus its chats.
type WorkspacePolicy struct {
	Level `yaml:",inline"`
	Chats map[string]Level `yaml:"chats,omitempty"`
}

// validate checks the tree; hasModel tells the model names a level may
// choose, models lists them for the error.
func (p Policies) validate(hasModel func(string) bool, models string) []string {
	var errs []string
	check := func(key string, l Level) {
		if l.Model != "" && !hasModel(l.Model) {
			errs = append(errs, fmt.Sprintf("%s.model: unknown model %q (want %s)", key, l.Model, models))
		}
		for _, n := range []struct {
			name string
			v    *int64
		}{{"limits.user_per_minute", int64Of(l.Limits.UserPerMinute)}, {"limits.workspace_per_minute", int64Of(l.Limits.WorkspacePerMinute)}, {"limits.reply_chars", int64Of(l.Limits.ReplyChars)}, {"limits.reply_posts", int64Of(l.Limits.ReplyPosts)}, {"budget.tokens_per_user_day", l.Budget.TokensPerUserDay}} {
			if n.v != nil && *n.v < 0 {
				errs = append(errs, fmt.Sprintf("%s.%s: must not be negative (0 is no limit), got %d", key, n.name, *n.v))
			}
		}
		for _, list := range []struct {
			name string
			pats []string
		}{{"tools.allow", l.Tools.Allow}, {"tools.deny", l.Tools.Deny}, {"tools.approve", l.Tools.Approve}, {"skills.allow", l.Skills.Allow}, {"skills.deny", l.Skills.Deny}} {
			for _, pat := range list.pats {
				if _, err := path.Match(pat, ""); err != nil || pat == "" {
					errs = append(errs, fmt.Sprintf("%s.%s: %q is not a valid name or glob", key, list.name, pat))
				}
			}
		}
		if t := l.ApprovalTimeout; t != nil && *t <= 0 {
			errs = append(errs, fmt.Sprintf("%s.approval_timeout: must be positive, got %s", key, *t))
		}
	}
	check("policies.default", p.Default)
	// A user id is unique only within its platform (a WeCom user id is
	// whatever its tenant's admin typed), so a global admin names the
	// platform its id belongs to.
	for _, a := range p.Default.Admins {
		if platform, id := SplitAdmin(a); platform == "" || id == "" {
			errs = append(errs, fmt.Sprintf("policies.default.admins: %q must name its platform, as PLATFORM:ID (one of %s), since a user id is only unique within one platform", a, strings.Join(PlatformNames(), ", ")))
		}
	}
	for _, a := range p.Default.Approvers.Users {
		if platform, id := SplitAdmin(a); platform == "" || id == "" {
			errs = append(errs, fmt.Sprintf("policies.default.approvers.users: %q must name its platform, as PLATFORM:ID (one of %s)", a, strings.Join(PlatformNames(), ", ")))
		}
	}
	names := make([]string, 0, len(p.Platforms))
	for name := range p.Platforms {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		pp := p.Platforms[name]
		key := "policies.platforms." + name
		if _, ok := LookupPlatform(name); !ok {
			errs = append(errs, fmt.Sprintf("%s: unknown platform (want one of %s)", key, strings.Join(PlatformNames(), ", ")))
			continue
		}
		check(key, pp.Level)
		checkAdmins(&errs, key+".admins", name, pp.Admins)
		checkAdmins(&errs, key+".approvers.users", name, pp.Approvers.Users)
		for ws, wp := range pp.Workspaces {
			wkey := key + ".workspaces." + ws
			check(wkey, wp.Level)
			checkAdmins(&errs, wkey+".admins", name, wp.Admins)
			checkAdmins(&errs, wkey+".approvers.users", name, wp.Approvers.Users)
			for chat, cl := range wp.Chats {
				check(wkey+".chats."+chat, cl)
				checkAdmins(&errs, wkey+".chats."+chat+".admins", name, cl.Admins)
				checkAdmins(&errs, wkey+".chats."+chat+".approvers.users", name, cl.Approvers.Users)
			}
		}
	}
	sort.Strings(errs)
	return errs
}

// SplitAdmin splits an admin entry written PLATFORM:ID, where PLATFORM is a
// registered platform, into its parts. Any other entry is a bare id: the
// platform is empty and id is the entry.
func SplitAdmin(entry string) (platform, id string) {
	if p, rest, ok := strings.Cut(entry, ":"); ok {
		if _, known := LookupPlatform(p); known {
			return p, rest
		}
	}
	return "", entry
}

// checkAdmins refuses, under platform's section, an admin (or approver) entry that names
// another platform: it could never match, and was surely meant elsewhere.
func checkAdmins(errs *[]string, key, platform string, admins []string) {
	for _, a := range admins {
		if p, _ := SplitAdmin(a); p != "" && p != platform {
			*errs = append(*errs, fmt.Sprintf("%s: %q names platform %s, but this is %s's section", key, a, p, platform))
		}
	}
}

func int64Of(v *int) *int64 {
	if v == nil {
		return nil
	}
	return new(int64(*v))
}
