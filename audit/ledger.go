// Package audit is the ledger of what changed things: every write-tool
// call, every approval asked for and decided, every change made in the
// admin console. Operators read it weeks later (`parley audit`, the
// console's Audit page) to answer who ran what, approved by whom, with
// what outcome.
//
// The ledger is one Redis stream under the configured prefix, shared by
// every replica and trimmed to audit.retention as entries are added. An
// entry never holds a call's arguments: only their SHA-256 and a bounded
// preview with whatever looks like a secret replaced (see Preview).
package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kinds of entry.
const (
	KindTool     = "tool"     // a write-tool call, run or refused
	KindApproval = "approval" // an approval asked for or decided
	KindAdmin    = "admin"    // a change made in the admin console
)

// Entry is one line of the ledger. Args is not stored: Record keeps its
// hash and redacted preview.
type Entry struct {
	Time         time.Time `json:"time"`
	Replica      string    `json:"replica,omitempty"`
	Kind         string    `json:"kind"`
	Channel      string    `json:"channel,omitempty"`
	Conversation string    `json:"conversation,omitempty"`
	// User is who asked: the sender of the message that led to a call, or
	// the console's signed-in user.
	User string `json:"user,omitempty"`
	// Via is how a console user signed in (session, bearer, header).
	Via   string `json:"via,omitempty"`
	Tool  string `json:"tool,omitempty"`
	Class string `json:"class,omitempty"` // read or write
	// Args is the call's arguments as the model sent them: never stored.
	Args       string `json:"-"`
	ArgsSHA256 string `json:"args_sha256,omitempty"`
	Preview    string `json:"preview,omitempty"`
	// Approver is who approved or denied the call.
	Approver string `json:"approver,omitempty"`
	// Action is what happened: "call", "approval requested", "approval
	// decided", a console change ("skill off").
	Action string `json:"action"`
	// Target is what a console change changed (a skill, a conversation).
	Target   string        `json:"target,omitempty"`
	Outcome  string        `json:"outcome"`
	Duration time.Duration `json:"duration,omitempty"`
}

// Recorder records entries; *Ledger implements it. Whoever calls Record
// does not fail its own work when the ledger cannot be written: the
// ledger logs that.
type Recorder interface {
	Record(ctx context.Context, e Entry) error
}

// Options are a ledger's settings.
type Options struct {
	// Prefix is redis.prefix; the stream is PREFIX + "audit".
	Prefix string
	// Retention is audit.retention (zero: DefaultRetention).
	Retention time.Duration
	// Replica marks the entries this process records.
	Replica string
	Log     *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// maxEntries bounds the stream whatever the retention: a runaway loop of
// calls cannot fill Redis. Trimming is approximate (whole nodes), so the
// stream holds about this many at most.
const maxEntries = 1_000_000

// Ledger is the Redis stream of entries.
type Ledger struct {
	client redis.UniversalClient
	key    string
	opts   Options
	log    *slog.Logger
}

// New returns the ledger of client under opts.Prefix. The stream is one
// key, so every command of the ledger goes to one node of a cluster.
func New(client redis.UniversalClient, opts Options) *Ledger {
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Ledger{client: client, key: opts.Prefix + "audit", opts: opts, log: log.With("component", "audit")}
}

// Key is the ledger's stream key.
func (l *Ledger) Key() string { return l.key }

// Retention is how long an entry stays.
func (l *Ledger) Retention() time.Duration { return l.opts.Retention }

// Record adds e to the ledger, with the time, this replica, and its
// arguments' hash and redacted preview, trimming what is older than the
// retention. It logs the entry too, so a ledger Redis cannot take is not
// lost. It is not cancelled with ctx: a change that happened is recorded.
func (l *Ledger) Record(ctx context.Context, e Entry) error {
	ctx = context.WithoutCancel(ctx)
	e = l.clean(e)
	l.log.LogAttrs(ctx, slog.LevelInfo, "audit: "+e.Kind+" "+e.Action, slog.String("audit", e.Kind),
		slog.String("channel", e.Channel), slog.String("conversation", e.Conversation), slog.String("user", e.User),
		slog.String("tool", e.Tool), slog.String("args_sha256", e.ArgsSHA256), slog.String("approver", e.Approver),
		slog.String("target", e.Target), slog.String("outcome", e.Outcome), slog.Duration("duration", e.Duration))
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("audit: encode entry: %w", err)
	}
	minID := strconv.FormatInt(e.Time.Add(-l.opts.Retention).UnixMilli(), 10)
	pipe := l.client.Pipeline()
	// Exact trimming by time (entries are few: writes, decisions,
	// changes), approximate by count, which is only a backstop.
	pipe.XAdd(ctx, &redis.XAddArgs{Stream: l.key, MinID: minID, Values: []any{"e", data}})
	pipe.XTrimMaxLenApprox(ctx, l.key, maxEntries, 0)
	if _, err := pipe.Exec(ctx); err != nil {
		l.log.WarnContext(ctx, "audit: entry not kept in Redis (it is in this log)", "kind", e.Kind, "action", e.Action, "err", err)
		return fmt.Errorf("audit: record: %w", err)
	}
	return nil
}

// clean fills in what the ledger knows and bounds every text: the
// arguments become their hash and preview.
func (l *Ledger) clean(e Entry) Entry {
	e.Time = l.opts.Now().UTC()
	if e.Replica == "" {
		e.Replica = l.opts.Replica
	}
	if e.Args != "" {
		e.ArgsSHA256, e.Preview = HashArgs(e.Args), Preview(e.Args)
	} else {
		e.Preview = clip(RedactText(e.Preview), MaxPreview)
	}
	e.Args = ""
	for _, f := range []*string{&e.Replica, &e.Kind, &e.Channel, &e.Conversation, &e.User, &e.Via, &e.Tool, &e.Class,
		&e.Approver, &e.Action, &e.Target, &e.Outcome} {
		*f = field(*f)
	}
	return e
}
