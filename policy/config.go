package policy

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/parleyhq/parley/config"
)

// SectionName is the key of the file this package defines.
const SectionName = "policies"

// Config is the policies: section, the policy tree: a global default, then per platform, per
// workspace (Slack team, Feishu tenant, WeChat account) and per chat. The
// Resolver resolves it most-specific-first.
//
// Every key of the tree is printed only when it is set (omitempty, with
// config.Names keeping a set but empty list), so that what `parley config check`
// prints reads back as the same tree: an unset list printed as [] would
// turn "the level above decides" into "nothing" for tools.allow.
type Config struct {
	Default   config.Level              `yaml:"default,omitempty"`
	Platforms map[string]PlatformPolicy `yaml:"platforms,omitempty"`
}

func init() {
	config.RegisterSection(config.SectionSpec{
		Name:      SectionName,
		NewConfig: func() config.SectionConfig { return &Config{} },
		// A level names platforms, which are other sections, so the tree
		// is checked with the whole configuration. The models a level
		// names are the agent's, which checks them (see Levels).
		// The profiles a level names are profiles:'s; the accounts it
		// names are its platform's.
		Check: func(c config.Config) error {
			t := FromConfig(c)
			problems := append(t.validate(), t.checkProfileNames(ProfilesFromConfig(c))...)
			problems = append(problems, checkAccounts(c, t)...)
			sort.Strings(problems)
			return config.Problems(problems)
		},
	})
}

// FromConfig returns c's policies: section, or an empty tree when c has
// none (a Config built by hand).
func FromConfig(c config.Config) *Config {
	if p, ok := config.SectionOf[*Config](c, SectionName); ok {
		return p
	}
	return &Config{}
}

// Env implements config.SectionConfig: no variable overrides the tree.
func (p *Config) Env() []config.EnvVar { return nil }

// Validate implements config.SectionConfig. Every rule of the tree is
// checked by the section's Check, which also sees the models and
// platforms a level may name.
func (p *Config) Validate() error { return nil }

// DefaultApprovalTimeout is how long a tool call waits for an approver
// unless approval_timeout says otherwise.
const DefaultApprovalTimeout = 10 * time.Minute

// Builtin reply caps: far above any answer worth reading in a chat, low
// enough that a runaway model cannot flood a channel.
const (
	DefaultReplyChars = 40_000
	DefaultReplyPosts = 10
)

// Builtin bounds of what one turn reads of its room (context.*): a long
// thread's last 50 messages, 12 KiB of text, about 3,000 tokens.
const (
	DefaultContextMaxMessages = 50
	DefaultContextMaxBytes    = 12288
)

// PlatformPolicy is a Level plus its accounts and workspaces. An
// account's level (policies.platforms.slack.accounts.hr) sits between the
// platform and its workspaces: it applies to what reaches that one app of
// the platform, and a workspace or chat below still decides over it.
type PlatformPolicy struct {
	config.Level `yaml:",inline"`
	Accounts     map[string]config.Level    `yaml:"accounts,omitempty"`
	Workspaces   map[string]WorkspacePolicy `yaml:"workspaces,omitempty"`
}

// accounted is a platform's section that configures several accounts
// (slack.accounts.NAME): a level may name only those.
type accounted interface {
	AccountNames() []string
}

// checkAccounts refuses an account level naming an account the
// platform's section does not configure: it could never apply.
func checkAccounts(c config.Config, p *Config) []string {
	var errs []string
	for name, pp := range p.Platforms {
		known := map[string]bool{}
		if sec, ok := c.Platforms[name].(accounted); ok {
			for _, a := range sec.AccountNames() {
				known[a] = true
			}
		}
		for acc := range pp.Accounts {
			if !known[acc] {
				errs = append(errs, fmt.Sprintf("policies.platforms.%s.accounts.%s: unknown account (the %s section configures %s)", name, acc, name, accountList(known)))
			}
		}
	}
	sort.Strings(errs)
	return errs
}

// accountList names the known accounts for an error.
func accountList(known map[string]bool) string {
	if len(known) == 0 {
		return "none"
	}
	names := make([]string, 0, len(known))
	for a := range known {
		names = append(names, a)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// WorkspacePolicy is a Level plus its chats.
type WorkspacePolicy struct {
	config.Level `yaml:",inline"`
	Chats        map[string]config.Level `yaml:"chats,omitempty"`
}

// validate checks the tree but for the models its levels name. Every
// problem names its key in full, and they are sorted.
func (p *Config) validate() []string {
	var errs []string
	check := func(key string, l config.Level) {
		for _, n := range []struct {
			name string
			v    *int64
		}{{"limits.user_per_minute", int64Of(l.Limits.UserPerMinute)}, {"limits.workspace_per_minute", int64Of(l.Limits.WorkspacePerMinute)}, {"limits.reply_chars", int64Of(l.Limits.ReplyChars)}, {"limits.reply_posts", int64Of(l.Limits.ReplyPosts)}, {"budget.tokens_per_user_day", l.Budget.TokensPerUserDay}} {
			if n.v != nil && *n.v < 0 {
				errs = append(errs, fmt.Sprintf("%s.%s: must not be negative (0 is no limit), got %d", key, n.name, *n.v))
			}
		}
		for _, n := range []struct {
			name string
			v    *int
		}{{"context.recent", l.Context.Recent}, {"context.max_messages", l.Context.MaxMessages}, {"context.max_bytes", l.Context.MaxBytes}} {
			if n.v != nil && *n.v < 0 {
				errs = append(errs, fmt.Sprintf("%s.%s: must not be negative (0 reads nothing), got %d", key, n.name, *n.v))
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
			errs = append(errs, fmt.Sprintf("policies.default.admins: %q must name its platform, as PLATFORM:ID (one of %s), since a user id is only unique within one platform", a, strings.Join(config.PlatformNames(), ", ")))
		}
	}
	for _, a := range p.Default.Approvers.Users {
		if platform, id := SplitAdmin(a); platform == "" || id == "" {
			errs = append(errs, fmt.Sprintf("policies.default.approvers.users: %q must name its platform, as PLATFORM:ID (one of %s)", a, strings.Join(config.PlatformNames(), ", ")))
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
		if _, ok := config.LookupPlatform(name); !ok {
			errs = append(errs, fmt.Sprintf("%s: unknown platform (want one of %s)", key, strings.Join(config.PlatformNames(), ", ")))
			continue
		}
		check(key, pp.Level)
		checkAdmins(&errs, key+".admins", name, pp.Admins)
		checkAdmins(&errs, key+".approvers.users", name, pp.Approvers.Users)
		for acc, al := range pp.Accounts {
			akey := key + ".accounts." + acc
			check(akey, al)
			checkAdmins(&errs, akey+".admins", name, al.Admins)
			checkAdmins(&errs, akey+".approvers.users", name, al.Approvers.Users)
		}
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
		if _, known := config.LookupPlatform(p); known {
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
