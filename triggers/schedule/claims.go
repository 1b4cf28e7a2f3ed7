package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Claims are the Redis records that make each fire time of a schedule run
// once across replicas: a cursor per schedule (the latest fire time that
// is done or given up) and a claim per fire time (a lease while one
// replica fires it, then "done"). The keys of one schedule share a hash
// tag, so each script touches one slot.
type Claims struct {
	client redis.UniversalClient
	prefix string
	// Retention is how long a done claim is kept, well past any replica's
	// view of the cursor.
	Retention time.Duration
}

// NewClaims returns the claims under prefix (redis.prefix).
func NewClaims(client redis.UniversalClient, prefix string) *Claims {
	return &Claims{client: client, prefix: prefix, Retention: 48 * time.Hour}
}

func (c *Claims) cursorKey(name string) string {
	return c.prefix + "schedule:{" + name + "}:cursor"
}

func (c *Claims) fireKey(name string, at time.Time) string {
	return c.prefix + "schedule:{" + name + "}:fire:" + strconv.FormatInt(at.Unix(), 10)
}

// Claim states.
const (
	// Held: another replica fires it now, its lease is live.
	Held = iota
	// Won: this replica holds the lease and fires it.
	Won
	// Done: it was fired.
	Done
)

// Cursor returns the latest fire time of name that is done or given up;
// the first call for a schedule sets it to now, so that a new schedule
// fires from now on, not for its past.
func (c *Claims) Cursor(ctx context.Context, name string, now time.Time) (time.Time, error) {
	key := c.cursorKey(name)
	if _, err := c.client.SetNX(ctx, key, now.Unix(), 0).Result(); err != nil {
		return time.Time{}, fmt.Errorf("schedule: cursor of %s: %w", name, err)
	}
	v, err := c.client.Get(ctx, key).Int64()
	if err != nil {
		return time.Time{}, fmt.Errorf("schedule: cursor of %s: %w", name, err)
	}
	return time.Unix(v, 0).UTC(), nil
}

// claimScript: KEYS[1] the fire's claim; ARGV token, now (ms), the lease's
// end (ms), the key's lifetime (ms). A lease that ended belongs to a
// replica that died mid-fire: it is taken over.
var claimScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == 'done' then return 2 end
if v then
  local dl = tonumber(string.match(v, ':(%d+)$'))
  if dl and dl > tonumber(ARGV[2]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[3], 'PX', ARGV[4])
return 1
`)

// Claim asks for the lease on name's fire at, until leaseEnd (by the
// scheduler's clock, so that every replica reads a lease the same way).
func (c *Claims) Claim(ctx context.Context, name string, at time.Time, token string, now, leaseEnd time.Time) (int, error) {
	n, err := claimScript.Run(ctx, c.client, []string{c.fireKey(name, at)},
		token, now.UnixMilli(), leaseEnd.UnixMilli(), c.Retention.Milliseconds()).Int()
	if err != nil {
		return Held, fmt.Errorf("schedule: claim %s at %s: %w", name, at.Format(time.RFC3339), err)
	}
	return n, nil
}

// State reports the claim of name's fire at without changing it: Done,
// Held (a live lease), or Won when there is none or its lease ended (free
// to take). abandoned is true for a lease that ended.
func (c *Claims) State(ctx context.Context, name string, at, now time.Time) (state int, abandoned bool, err error) {
	v, err := c.client.Get(ctx, c.fireKey(name, at)).Result()
	if errors.Is(err, redis.Nil) {
		return Won, false, nil
	}
	if err != nil {
		return Held, false, fmt.Errorf("schedule: claim of %s: %w", name, err)
	}
	if v == "done" {
		return Done, false, nil
	}
	if i := lastColon(v); i >= 0 {
		if dl, perr := strconv.ParseInt(v[i+1:], 10, 64); perr == nil && dl <= now.UnixMilli() {
			return Won, true, nil
		}
	}
	return Held, false, nil
}

func lastColon(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ':' {
			return i
		}
	}
	return -1
}

// finishScript: KEYS[1] the fire's claim, KEYS[2] the cursor; ARGV the
// fire time (s), the claim's lifetime (ms), "1" to mark it done. The
// cursor only moves forward.
var finishScript = redis.NewScript(`
if ARGV[3] == '1' then redis.call('SET', KEYS[1], 'done', 'PX', ARGV[2]) end
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[1]) > cur then redis.call('SET', KEYS[2], ARGV[1]) end
return 1
`)

// Finish marks name's fire at done (fired) or, with fired false, only
// moves the cursor past it (skipped as missed).
func (c *Claims) Finish(ctx context.Context, name string, at time.Time, fired bool) error {
	flag := "0"
	if fired {
		flag = "1"
	}
	err := finishScript.Run(ctx, c.client, []string{c.fireKey(name, at), c.cursorKey(name)},
		at.Unix(), c.Retention.Milliseconds(), flag).Err()
	if err != nil {
		return fmt.Errorf("schedule: finish %s at %s: %w", name, at.Format(time.RFC3339), err)
	}
	return nil
}

// Forget deletes the cursor of a schedule that is gone (a chat schedule
// removed), so that one added later under the same name starts afresh.
func (c *Claims) Forget(ctx context.Context, name string) error {
	if err := c.client.Del(ctx, c.cursorKey(name)).Err(); err != nil {
		return fmt.Errorf("schedule: forget %s: %w", name, err)
	}
	return nil
}

// Result is the outcome of a schedule's latest fire time.
type Result struct {
	// At is the fire time, Done when it ended (queued, skipped or failed).
	At      time.Time `json:"at"`
	Done    time.Time `json:"done"`
	Outcome string    `json:"outcome"` // fired, missed, error
	Error   string    `json:"error,omitempty"`
}

func (c *Claims) lastKey(name string) string { return c.prefix + "schedule:{" + name + "}:last" }

// Record keeps r as name's latest result, for `parley triggers list`
// and the console; it expires with the claims.
func (c *Claims) Record(ctx context.Context, name string, r Result) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("schedule: encode result: %w", err)
	}
	if err := c.client.Set(ctx, c.lastKey(name), data, c.Retention).Err(); err != nil {
		return fmt.Errorf("schedule: record %s: %w", name, err)
	}
	return nil
}

// Last returns name's latest result; ok is false when none is kept.
func (c *Claims) Last(ctx context.Context, name string) (r Result, ok bool, err error) {
	data, err := c.client.Get(ctx, c.lastKey(name)).Bytes()
	if errors.Is(err, redis.Nil) {
		return Result{}, false, nil
	}
	if err != nil {
		return Result{}, false, fmt.Errorf("schedule: last result of %s: %w", name, err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return Result{}, false, fmt.Errorf("schedule: last result of %s: %w", name, err)
	}
	return r, true, nil
}
