package policy

// The questions a scope's Effective policy answers: which tools, which
// skills, which approvals and approvers, and who may talk to the bot.

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley/config"
)

// Tool decides whether the tool name, which writes if writes is true, may be
// offered and called: Offer for a tool whose class is the operator's or
// Parley's own, not a claim of its source.
func (e *Effective) Tool(name string, writes bool) Decision {
	return e.Offer(ToolInfo{Name: name, Writes: writes})
}

// Offer decides whether the tool t may be offered and called. Deny beats
// everything; then, when tools.write is false, write tools are dropped and
// so are read tools whose class is only their source's claim
// (t.ReadClaimed); then a set allow list must match. Where tools.write is
// false, the rule of an allowed tool whose source decides its class
// (t.ClassRule) says what made it read.
func (e *Effective) Offer(t ToolInfo) Decision {
	if pat, ok := firstMatch(e.toolDeny.val, t.Name); ok {
		return Decision{Rule: fmt.Sprintf("tools.deny %q", pat), Level: e.toolDeny.level}
	}
	if t.Sends && !e.filesSend.val {
		return Decision{Rule: "files.send: false", Level: e.filesSend.level}
	}
	noWrites := !e.toolWrite.val
	switch {
	case t.Writes && noWrites:
		return Decision{Rule: "tools.write: false", Level: e.toolWrite.level}
	case t.ReadClaimed && noWrites:
		return Decision{Rule: "tools.write: false (" + describeClass(t) + ", only the server's claim)", Level: e.toolWrite.level}
	}
	d, decided := allowList("tools.allow", e.toolAllow, t.Name)
	switch {
	case !decided && t.Writes && e.toolWrite.set:
		// Name the level that re-enabled writes: it is the one an operator
		// would look for when a write tool shows up unexpectedly.
		d = Decision{Allowed: true, Rule: "tools.write: true", Level: e.toolWrite.level}
	case !decided:
		d = Decision{Allowed: true, Rule: RuleDefaultAllowed, Level: LevelBuiltin}
	}
	if d.Allowed && noWrites && t.ClassRule != "" {
		d.Rule += " (" + describeClass(t) + ")"
	}
	return d
}

// describeClass names what made t read or write, for a decision's rule.
func describeClass(t ToolInfo) string {
	if t.ClassRule == "" {
		return "read by its source's say-so"
	}
	return "class: " + t.ClassRule
}

// FilesSend is files.send: whether send_file may be offered, and whether
// a level set it (unset, the gateway offers it where the chat's channel
// can send files).
func (e *Effective) FilesSend() (send, set bool) { return e.filesSend.val, e.filesSend.set }

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

// IsOperator reports whether user runs this process
// (Resolver.WithOperator): they may run the admin commands of its
// conversations. The access rules still apply to them, so that an
// operator can try what a refused user hears.
func (e *Effective) IsOperator(user string) bool {
	return user != "" && user == e.operator
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
		platform, id := SplitAdmin(entry)
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

func clonePolicies(p Config) Config {
	out := Config{Default: cloneLevel(p.Default)}
	if p.Platforms == nil {
		return out
	}
	out.Platforms = make(map[string]PlatformPolicy, len(p.Platforms))
	for name, pp := range p.Platforms {
		cp := PlatformPolicy{Level: cloneLevel(pp.Level)}
		if pp.Accounts != nil {
			cp.Accounts = make(map[string]config.Level, len(pp.Accounts))
			for acc, al := range pp.Accounts {
				cp.Accounts[acc] = cloneLevel(al)
			}
		}
		if pp.Workspaces != nil {
			cp.Workspaces = make(map[string]WorkspacePolicy, len(pp.Workspaces))
			for ws, wp := range pp.Workspaces {
				cw := WorkspacePolicy{Level: cloneLevel(wp.Level)}
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
		Budget:  config.Budget{TokensPerUserDay: clonePtr(l.Budget.TokensPerUserDay)},
		Model:   l.Model,
		Profile: l.Profile,
		Approvers: config.Approvers{
			Users:     slices.Clone(l.Approvers.Users),
			Requester: cloneBool(l.Approvers.Requester),
		},
		ApprovalTimeout: clonePtr(l.ApprovalTimeout),
		Context: config.Context{
			Thread:      cloneBool(l.Context.Thread),
			Recent:      clonePtr(l.Context.Recent),
			MaxMessages: clonePtr(l.Context.MaxMessages),
			MaxBytes:    clonePtr(l.Context.MaxBytes),
		},
		Files: config.FileRules{Send: cloneBool(l.Files.Send)},
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
