// Package quota enforces the limits a public bot needs on every replica at
// once: how many messages a user, and a whole workspace, may send a minute,
// and how many model tokens a user may spend a day. The counters live in
// the Redis the replicas share, so a user cannot multiply their allowance
// by reaching several replicas.
//
// Rates use GCRA (the generic cell rate algorithm): one timestamp per
// counter, the theoretical arrival time of the next message, so that a
// limit of N a minute admits a burst of N and then one message every
// minute/N. A check is one script call whose keys share the hash tag of
// the workspace, so it runs on one slot in Redis Cluster, and time is
// Redis's own clock, so replicas with skewed clocks agree. A turn's tokens
// are counted by one script on one key as well, which the gateway sends in
// the pipeline of the turn's completion (Queue).
package quota

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/internal/pipescript"
)

// Limits are the quotas of one message's scope. A zero field is no limit.
type Limits struct {
	UserPerMinute      int
	WorkspacePerMinute int
	TokensPerUserDay   int64
}

// Subject is whom a message counts against: a user of one workspace of one
// platform. User ids are only unique within a platform and workspace.
type Subject struct {
	Channel   string
	Workspace string
	User      string
}

// Which limit refused a message.
const (
	User      = "user"
	Workspace = "workspace"
	Budget    = "budget"
)

// Verdict is the answer of Check.
type Verdict struct {
	// Refused is "" when the message may go ahead, else the limit that
	// refused it: User, Workspace or Budget.
	Refused string
	// Notify is true for the first refusal of the subject within
	// NoticeEvery: the user is told once, not at every message.
	Notify bool
	// RetryAfter is when a rate-refused message would have been admitted.
	RetryAfter time.Duration
}

// NoticeEvery is how often at most a refused user is told so.
const NoticeEvery = time.Minute

// period is the window of the per-minute rates.
const period = time.Minute

// dayKeyTTL keeps a day's token count past the day's end, so that a clock
// a little behind still finds it.
const dayKeyTTL = 48 * time.Hour

// Quotas checks and spends quotas in one Redis. It is safe for
// concurrent use.
type Quotas struct {
	client redis.UniversalClient
	prefix string
	now    func() time.Time // the day of a token count; Redis's clock does the rates
}

// New returns Quotas keeping their counters in client under prefix (the
// store's key prefix, e.g. "parley:").
func New(client redis.UniversalClient, prefix string) *Quotas {
	return &Quotas{client: client, prefix: prefix, now: time.Now}
}

// keys are a subject's keys; they share the hash tag of its workspace.
func (q *Quotas) keys(s Subject, day string) []string {
	base := q.prefix + "quota:{" + s.Channel + ":" + s.Workspace + "}"
	return []string{
		base + ":user:" + s.User,
		base,
		base + ":notice:" + s.User,
		base + ":tokens:" + day + ":" + s.User,
	}
}

func day(t time.Time) string { return t.UTC().Format("2006-01-02") }

// checkScript decides one message. KEYS: user rate, workspace rate, user
// notice, user's tokens today. ARGV: user interval (µs, 0: no limit),
// workspace interval, budget (0: none), period (µs), notice TTL (ms).
// It returns {0} when the message may go ahead (and counts it), else
// {refused (1 user, 2 workspace, 3 budget), notify (0/1), wait (µs)}.
//
// A refused message counts against nothing, so a user over their own
// rate does not use up the workspace's.
var checkScript = redis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local budget = tonumber(ARGV[3])
local function refuse(which, wait)
  local notify = 0
  if redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[5]) then notify = 1 end
  return {which, notify, wait}
end
if budget > 0 and tonumber(redis.call('GET', KEYS[4]) or '0') >= budget then
  return refuse(3, 0)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local period = tonumber(ARGV[4])
local function gcra(key, interval)
  if interval <= 0 then return 0, 0 end
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat < now then tat = now end
  local new = tat + interval
  local wait = new - period - now
  if wait > 0 then return -1, wait end
  return new, 0
end
local unew, uwait = gcra(KEYS[1], tonumber(ARGV[1]))
if unew < 0 then return refuse(1, uwait) end
local wnew, wwait = gcra(KEYS[2], tonumber(ARGV[2]))
if wnew < 0 then return refuse(2, wwait) end
if unew > 0 then redis.call('SET', KEYS[1], string.format('%d', unew), 'PX', math.floor((unew - now) / 1000) + 1) end
if wnew > 0 then redis.call('SET', KEYS[2], string.format('%d', wnew), 'PX', math.floor((wnew - now) / 1000) + 1) end
return {0}
`)

// interval is the GCRA emission interval of perMinute, in microseconds;
// 0 for no limit.
func interval(perMinute int) int64 {
	if perMinute <= 0 {
		return 0
	}
	return max(period.Microseconds()/int64(perMinute), 1)
}

// Check decides whether a message of s may go ahead under l and, if so,
// counts it against the rates. With no limit set it asks Redis nothing.
func (q *Quotas) Check(ctx context.Context, s Subject, l Limits) (Verdict, error) {
	if l.UserPerMinute <= 0 && l.WorkspacePerMinute <= 0 && l.TokensPerUserDay <= 0 {
		return Verdict{}, nil
	}
	res, err := checkScript.Run(ctx, q.client, q.keys(s, day(q.now())),
		interval(l.UserPerMinute), interval(l.WorkspacePerMinute), max(l.TokensPerUserDay, 0),
		period.Microseconds(), NoticeEvery.Milliseconds()).Int64Slice()
	if err != nil {
		return Verdict{}, fmt.Errorf("quota: check: %w", err)
	}
	if len(res) == 0 || res[0] == 0 {
		return Verdict{}, nil
	}
	if len(res) < 3 {
		return Verdict{}, fmt.Errorf("quota: check: unexpected answer %v", res)
	}
	v := Verdict{Notify: res[1] == 1, RetryAfter: time.Duration(res[2]) * time.Microsecond}
	switch res[0] {
	case 1:
		v.Refused = User
	case 2:
		v.Refused = Workspace
	default:
		v.Refused = Budget
	}
	return v, nil
}

// spendScript adds ARGV[1] tokens to a day's count, KEYS[1], keeps it
// ARGV[2] seconds and returns the new total.
var spendScript = redis.NewScript(`
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return n
`)

// Spend adds tokens to what s used today and returns the new total. Call
// it after every turn that reached the model, with the tokens the model
// reported.
func (q *Quotas) Spend(ctx context.Context, s Subject, tokens int64) (int64, error) {
	key, args := q.spend(s, tokens)
	total, err := spendScript.Run(ctx, q.client, []string{key}, args...).Int64()
	if err != nil {
		return 0, fmt.Errorf("quota: spend tokens: %w", err)
	}
	return total, nil
}

// Queue adds Spend's write to p, a pipeline that carries another write of
// the turn, so that it costs no round trip of its own. Once p has run,
// done returns the new total. A write Redis refused for not knowing the
// script (NOSCRIPT, after a restart: it did not run) is sent again by
// itself then; any other failure is only reported: a write that may have
// landed is never sent twice.
func (q *Quotas) Queue(ctx context.Context, p redis.Pipeliner, s Subject, tokens int64) (done func(context.Context) (int64, error)) {
	key, args := q.spend(s, tokens)
	result := pipescript.Queue(ctx, p, q.client, spendScript, []string{key}, args...)
	return func(ctx context.Context) (int64, error) {
		total, err := result(ctx).Int64()
		if err != nil {
			return 0, fmt.Errorf("quota: spend tokens: %w", err)
		}
		return total, nil
	}
}

// spend is the key and the script's arguments of s spending tokens today.
func (q *Quotas) spend(s Subject, tokens int64) (string, []any) {
	return q.keys(s, day(q.now()))[3], []any{max(tokens, 0), int64(dayKeyTTL / time.Second)}
}

// Spent returns the tokens s used today.
func (q *Quotas) Spent(ctx context.Context, s Subject) (int64, error) {
	n, err := q.client.Get(ctx, q.keys(s, day(q.now()))[3]).Int64()
	if err == redis.Nil {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("quota: read tokens: %w", err)
	}
	return n, nil
}
