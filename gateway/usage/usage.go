// Package usage keeps the model tokens every turn spent, by user, chat,
// channel and model, in the Redis the replicas share, so that an operator
// can see who spends what (`parley usage`).
//
// Each hour of UTC time is one hash, PREFIX usage:{YYYY-MM-DDTHH}, that
// expires Retention after its hour: retention is bounded whatever the
// traffic. A turn is one script of HINCRBYs and an EXPIREAT on one key (the
// hash tag is the hour), so it runs on one slot in Redis Cluster; a report
// reads one hash per hour of its window, each on its own slot. The gateway
// sends a turn's record in the pipeline of the turn's completion (Queue),
// so that it costs no round trip of its own.
//
// A field names what it counts as a JSON array, so that no platform id,
// whatever characters it holds, can be mistaken for another: the turns of
// one user in one chat with one model, and one kind of count,
// ["turn","slack","T1","C1","U1","default","prompt"]. The kinds are
// prompt, completion and cached tokens, and turns. A report adds the
// fields up by what it groups by. A turn is one HINCRBY per kind it
// counts (three or four); earlier versions wrote a field per grouping
// (["user","slack","T1","U1","prompt"], ["chat",…], ["channel",…],
// ["model",…]: twelve or sixteen), and reports still read those in the
// hours that hold them.
package usage

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/internal/jsonstring"
	"github.com/parleyhq/parley/internal/pipescript"
)

// Retention is how long an hour's counts are kept.
const Retention = 35 * 24 * time.Hour

// MaxWindow is the longest window a report may ask for: older hours
// have expired.
const MaxWindow = Retention

// hourLayout names an hour in a key.
const hourLayout = "2006-01-02T15"

// What a report groups by.
const (
	ByUser    = "user"
	ByChat    = "chat"
	ByChannel = "channel"
	ByModel   = "model"
)

// Bys lists the groupings, in the order the CLI names them.
var Bys = []string{ByUser, ByChat, ByChannel, ByModel}

// byTurn is the first part of a field of this version's form.
const byTurn = "turn"

// The kinds counted for each group.
const (
	kindPrompt     = "prompt"
	kindCompletion = "completion"
	kindCached     = "cached"
	kindTurns      = "turns"
)

// Turn is one turn's spending and whom it counts for.
type Turn struct {
	Channel   string
	Workspace string
	Chat      string
	User      string
	// Model is the model that answered, by its name in the configuration.
	Model      string
	Prompt     int
	Completion int
	Cached     int
}

// Store records turns and reports on them. It is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	prefix string
	now    func() time.Time
}

// New returns a Store keeping its hashes in client under prefix (the
// store's key prefix, e.g. "parley:").
func New(client redis.UniversalClient, prefix string) *Store {
	return &Store{client: client, prefix: prefix, now: time.Now}
}

// key is the hash of the hour of t.
func (s *Store) key(t time.Time) string {
	return s.prefix + "usage:{" + t.UTC().Format(hourLayout) + "}"
}

// recordScript adds a turn's counts to an hour's hash in one step.
// KEYS: the hash. ARGV: field, increment, field, increment, …, and last
// the hash's expiry (Unix seconds).
var recordScript = redis.NewScript(`
for i = 1, #ARGV - 1, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i+1])
end
redis.call('EXPIREAT', KEYS[1], ARGV[#ARGV])
return 1
`)

// field is parts as a JSON array, byte for byte as json.Marshal writes
// it. Every turn records four fields: written by hand, without
// json.Marshal's reflection, pooled encoder and copy.
func field(parts ...string) string {
	n := 2
	for _, p := range parts {
		n += len(p) + 3
	}
	b := make([]byte, 1, n)
	b[0] = '['
	for i, p := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonstring.Append(b, p)
	}
	return string(append(b, ']'))
}

// Record adds one turn's tokens to the current hour. A turn that spent
// nothing (the model was never reached) is not recorded.
func (s *Store) Record(ctx context.Context, t Turn) error {
	key, args, ok := s.record(t)
	if !ok {
		return nil
	}
	if err := recordScript.Run(ctx, s.client, []string{key}, args...).Err(); err != nil {
		return fmt.Errorf("usage: record a turn: %w", err)
	}
	return nil
}

// Queue adds t's record to p, a pipeline that carries another write of the
// turn, so that the record costs no round trip of its own. Once p has run,
// done reports whether t was recorded. A record Redis refused for not
// knowing the script (NOSCRIPT, after a restart: it did not run) is sent
// again by itself then; any other failure is only reported, as with
// Record: a record that may have landed is never sent twice.
func (s *Store) Queue(ctx context.Context, p redis.Pipeliner, t Turn) (done func(context.Context) error) {
	key, args, ok := s.record(t)
	if !ok {
		return func(context.Context) error { return nil }
	}
	result := pipescript.Queue(ctx, p, s.client, recordScript, []string{key}, args...)
	return func(ctx context.Context) error {
		if err := result(ctx).Err(); err != nil {
			return fmt.Errorf("usage: record a turn: %w", err)
		}
		return nil
	}
}

// record is t's hash and the script's arguments; ok false when t spent
// nothing.
func (s *Store) record(t Turn) (key string, args []any, ok bool) {
	if t.Prompt <= 0 && t.Completion <= 0 {
		return "", nil, false
	}
	now := s.now()
	counts := []struct {
		kind string
		n    int
	}{{kindPrompt, t.Prompt}, {kindCompletion, t.Completion}, {kindCached, t.Cached}, {kindTurns, 1}}
	// One script rather than a MULTI: a turn's recording cost the gateway
	// as much CPU as its model call. field(…, kind) is the turn's array
	// with the kind added before the closing bracket; the kinds are plain
	// ASCII.
	open := field(byTurn, t.Channel, t.Workspace, t.Chat, t.User, t.Model)
	open = open[:len(open)-1] + `,"`
	args = make([]any, 0, 2*len(counts)+1)
	for _, c := range counts {
		if c.n > 0 {
			args = append(args, open+c.kind+`"]`, c.n)
		}
	}
	// The hour's end plus the retention: the last write sets it.
	hour := now.UTC().Truncate(time.Hour)
	args = append(args, hour.Add(time.Hour+Retention).Unix())
	return s.key(now), args, true
}

// Row is one group's spending over a report's window.
type Row struct {
	Channel    string `json:"channel,omitempty"`
	Workspace  string `json:"workspace,omitempty"`
	User       string `json:"user,omitempty"`
	Chat       string `json:"chat,omitempty"`
	Model      string `json:"model,omitempty"`
	Turns      int64  `json:"turns"`
	Prompt     int64  `json:"prompt_tokens"`
	Completion int64  `json:"completion_tokens"`
	Cached     int64  `json:"cached_tokens"`
}

// Total is the prompt and completion tokens together.
func (r Row) Total() int64 { return r.Prompt + r.Completion }

// Report is the spending of a window, grouped one way.
type Report struct {
	By string `json:"by"`
	// From and To bound the window, rounded out to whole hours.
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
	Rows  []Row     `json:"rows"`
	Total Row       `json:"total"`
}

// ErrWindow is a window that is not positive or longer than MaxWindow.
var ErrWindow = errors.New("usage: the window must be positive and at most the retention")

// Read reports the spending of the last since, grouped by by (one of Bys),
// the biggest spender first. The window is rounded out to whole hours: it
// starts at the hour since ago falls in.
func (s *Store) Read(ctx context.Context, since time.Duration, by string) (Report, error) {
	if !slices.Contains(Bys, by) {
		return Report{}, fmt.Errorf("usage: cannot group by %q (want one of %v)", by, Bys)
	}
	if since <= 0 || since > MaxWindow {
		return Report{}, ErrWindow
	}
	now := s.now().UTC()
	from := now.Add(-since).Truncate(time.Hour)
	rep := Report{By: by, From: from, To: now, Rows: []Row{}}
	var cmds []*redis.MapStringStringCmd
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for h := from; !h.After(now); h = h.Add(time.Hour) {
			cmds = append(cmds, p.HGetAll(ctx, s.key(h)))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Report{}, fmt.Errorf("usage: read: %w", err)
	}
	rows := map[string]*Row{}
	for _, c := range cmds {
		for f, v := range c.Val() {
			group, kind, ok := groupOf(f, by)
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				continue
			}
			id := field(group...)
			r, ok := rows[id]
			if !ok {
				r = rowOf(by, group)
				if r == nil {
					continue
				}
				rows[id] = r
			}
			add(r, kind, n)
			add(&rep.Total, kind, n)
		}
	}
	for _, r := range rows {
		rep.Rows = append(rep.Rows, *r)
	}
	slices.SortFunc(rep.Rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(b.Total(), a.Total()), cmp.Compare(b.Turns, a.Turns),
			cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.Workspace, b.Workspace),
			cmp.Compare(a.User, b.User), cmp.Compare(a.Chat, b.Chat), cmp.Compare(a.Model, b.Model))
	})
	return rep, nil
}

// groupOf is the group of by that field f counts for, and its kind: from
// a turn's field, the parts by names; from an earlier version's, the
// field's own when it is of by. ok is false for a field of no group of by.
func groupOf(f, by string) (group []string, kind string, ok bool) {
	var parts []string
	if json.Unmarshal([]byte(f), &parts) != nil || len(parts) < 3 {
		return nil, "", false
	}
	kind = parts[len(parts)-1]
	if parts[0] != byTurn {
		return parts[1 : len(parts)-1], kind, parts[0] == by
	}
	if len(parts) != 7 {
		return nil, "", false
	}
	channel, workspace, chat, user, model := parts[1], parts[2], parts[3], parts[4], parts[5]
	switch by {
	case ByUser:
		return []string{channel, workspace, user}, kind, true
	case ByChat:
		return []string{channel, workspace, chat}, kind, true
	case ByChannel:
		return []string{channel}, kind, true
	case ByModel:
		return []string{model}, kind, true
	}
	return nil, "", false
}

// rowOf names a group's row; nil for a field of the wrong shape.
func rowOf(by string, g []string) *Row {
	switch {
	case by == ByUser && len(g) == 3:
		return &Row{Channel: g[0], Workspace: g[1], User: g[2]}
	case by == ByChat && len(g) == 3:
		return &Row{Channel: g[0], Workspace: g[1], Chat: g[2]}
	case by == ByChannel && len(g) == 1:
		return &Row{Channel: g[0]}
	case by == ByModel && len(g) == 1:
		return &Row{Model: g[0]}
	}
	return nil
}

func add(r *Row, kind string, n int64) {
	switch kind {
	case kindPrompt:
		r.Prompt += n
	case kindCompletion:
		r.Completion += n
	case kindCached:
		r.Cached += n
	case kindTurns:
		r.Turns += n
	}
}
