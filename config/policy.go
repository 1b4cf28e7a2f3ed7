package config

// The vocabulary of the policy tree: what one level may set. The tree
// itself, the policies: section, is the policy package's (policy.Config);
// a level stays here because a platform registers its builtin level with
// its section (Platform.Policy), and config imports no package.

import "time"

// DefaultModelKey is how fallbacks, policies and metrics name the model:
// section, the model every turn uses unless a policy names another. The
// sections are the agent's; the name is here, below both the policy that
// names a model and the agent that runs it.
const DefaultModelKey = "default"

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
	// it expires (nil: the level above; policy.DefaultApprovalTimeout).
	ApprovalTimeout *time.Duration `yaml:"approval_timeout,omitempty"`
	// Context says how much of the room (the thread, the chat's recent
	// messages) a turn reads before answering.
	Context Context `yaml:"context,omitempty"`
	// Profile names the profile (a key of profiles:) of the scope's
	// turns: its system prompt, and its model, tools and skills rules as
	// if written at this level. Empty leaves it to the level above.
	Profile string `yaml:"profile,omitempty"`
	// Files says what the scope's turns may do with the files their
	// tools make.
	Files FileRules `yaml:"files,omitempty"`
}

// FileRules is LEVEL.files. Send false never offers send_file (the tool
// class send); unset offers it where the chat's channel can send files.
type FileRules struct {
	Send *bool `yaml:"send,omitempty"`
}

// Context is what a turn reads of the room it was asked in. Nil leaves a
// key to the level above (policy.DefaultContext*).
type Context struct {
	// Thread: read the thread before answering in it.
	Thread *bool `yaml:"thread,omitempty"`
	// Recent is how many of the channel's or group's messages are read
	// before a top-level mention (0: none).
	Recent *int `yaml:"recent,omitempty"`
	// MaxMessages and MaxBytes bound what one turn reads; past them the
	// oldest are left out, with a note saying how many.
	MaxMessages *int `yaml:"max_messages,omitempty"`
	MaxBytes    *int `yaml:"max_bytes,omitempty"`
}

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
// builtin default of the reply caps, policy.DefaultReplyChars and
// DefaultReplyPosts); nil leaves it to that level.
type Limits struct {
	UserPerMinute      *int `yaml:"user_per_minute,omitempty"`
	WorkspacePerMinute *int `yaml:"workspace_per_minute,omitempty"`
	ReplyChars         *int `yaml:"reply_chars,omitempty"`
	ReplyPosts         *int `yaml:"reply_posts,omitempty"`
}

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
