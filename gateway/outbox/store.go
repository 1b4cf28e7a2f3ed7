package outbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/channels"
)

// Item is one reply waiting for delivery.
type Item struct {
	ID      string
	Message channels.Message // the message answered: where the reply goes
	Parts   []string         // the posts, as cut when the reply was first sent
	// File, when set, makes the item one file to upload (Parts is then
	// one empty part): the kept file it names, not its bytes, which stay
	// in the conversation's store.
	File *FileRef
	// Sent holds the platform's ids of the parts posted so far, in order:
	// the next attempt starts at Parts[len(Sent)].
	Sent     []string
	Created  time.Time // when the reply first failed, by Redis's clock
	Attempts int       // claims of the item so far

	owner string // the token of this claim; every change checks it
}

// Channel is the platform the reply goes to.
func (it *Item) Channel() string { return it.Message.Channel }

// itemData is the part of an item that never changes once it is queued.
type itemData struct {
	Message channels.Message `json:"msg"`
	Parts   []string         `json:"parts"`
	File    *FileRef         `json:"file,omitempty"`
}

// FileRef names a kept file an item sends: its conversation, its id
// (att_N) and the caption that goes with it.
type FileRef struct {
	Conversation string `json:"conv"`
	ID           string `json:"id"`
	Caption      string `json:"caption,omitempty"`
}

// errLeaseLost is a change refused because the item is no longer this
// claim's: its lease ran out and another replica claimed it, or it is gone.
var errLeaseLost = errors.New("outbox: the item's lease was lost")

// errUndecodable is a claimed item whose stored form cannot be read.
var errUndecodable = errors.New("outbox: undecodable item")

// doneTTL is how long a finished item (delivered or failed) is kept, with
// the ids of its posts, for an operator to look up.
const doneTTL = 24 * time.Hour

// store keeps items in Redis. Every key shares the hash tag {outbox}, so
// each script runs on one slot of a Redis Cluster: the due set orders item
// ids by when they may next be tried, and each item is a hash.
//
// A claim moves the item's score to the end of its lease, so an item whose
// replica died comes due again by itself; the claim's token, stored in
// the item, must match every later change, so a replica that lost its
// lease cannot record or finish anything.
type store struct {
	client redis.UniversalClient
	base   string // prefix + "outbox:{outbox}"
}

func newStore(client redis.UniversalClient, prefix string) *store {
	return &store{client: client, base: prefix + "outbox:{outbox}"}
}

// due is the set of item ids by the time (ms) they may next be tried.
func (s *store) due() string { return s.base + ":due" }

// item is the hash of item id.
func (s *store) item(id string) string { return s.base + ":item:" + id }

// keys are the KEYS of every item script: the due set and the item.
func (s *store) keys(id string) []string { return []string{s.due(), s.item(id)} }

// durationMS is d in whole milliseconds, never negative: a script's ARGV.
func durationMS(d time.Duration) int64 { return max(d.Milliseconds(), 0) }

// newToken names an item or a claim: random, so that no two collide.
func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// redisTime is a time of Redis's clock, read in milliseconds.
func redisTime(ms int64) time.Time { return time.UnixMilli(ms) }

// msFrom reads an integer a script returned (as an integer or a string);
// 0 when it is neither.
func msFrom(v any) int64 {
	n, _ := strconv.ParseInt(fmt.Sprint(v), 10, 64)
	return n
}

// nowMS is the Lua prelude reading Redis's clock in milliseconds; every
// replica then agrees on what is due, whatever its own clock says.
const nowMS = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// addScript queues an item. KEYS: due, item. ARGV: id, data, parts,
// attempts, delay (ms), then the ids of the parts already posted.
var addScript = redis.NewScript(nowMS + `
redis.call('HSET', KEYS[2], 'data', ARGV[2], 'created', now, 'total', ARGV[3], 'sent', #ARGV - 5, 'attempts', ARGV[4], 'owner', '')
for i = 6, #ARGV do redis.call('HSET', KEYS[2], 'id:' .. (i - 6), ARGV[i]) end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[5]), ARGV[1])
return now
`)

// add queues it, to be tried after delay. Its Sent parts are recorded as
// posted.
func (s *store) add(ctx context.Context, it *Item, delay time.Duration) error {
	data, err := json.Marshal(itemData{Message: it.Message, Parts: it.Parts, File: it.File})
	if err != nil {
		return fmt.Errorf("outbox: encode item: %w", err)
	}
	args := []any{it.ID, data, len(it.Parts), it.Attempts, durationMS(delay)}
	for _, id := range it.Sent {
		args = append(args, id)
	}
	created, err := addScript.Run(ctx, s.client, s.keys(it.ID), args...).Int64()
	if err != nil {
		return fmt.Errorf("outbox: queue item: %w", err)
	}
	it.Created = redisTime(created)
	return nil
}

// claimScript claims one item if it is due. KEYS: due, item. ARGV: id,
// token, lease (ms). It returns {0} when the item is gone, {1, wait ms}
// when it is not due yet, else {2, now, field, value, …}.
var claimScript = redis.NewScript(nowMS + `
local due = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not due then return {0} end
if tonumber(due) > now then return {1, tonumber(due) - now} end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return {0}
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('HSET', KEYS[2], 'owner', ARGV[2])
redis.call('HINCRBY', KEYS[2], 'attempts', 1)
local out = {2, now}
for _, v in ipairs(redis.call('HGETALL', KEYS[2])) do table.insert(out, v) end
return out
`)

// claim takes the earliest due item for lease. It returns nil and the
// wait until the next one is due (0: none queued) when none is due now.
func (s *store) claim(ctx context.Context, lease time.Duration) (*Item, time.Duration, time.Time, error) {
	for {
		ids, err := s.client.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.due(), Start: 0, Stop: 0}).Result()
		if err != nil {
			return nil, 0, time.Time{}, fmt.Errorf("outbox: look for due items: %w", err)
		}
		if len(ids) == 0 {
			return nil, 0, time.Time{}, nil
		}
		token := newToken()
		res, err := claimScript.Run(ctx, s.client, s.keys(ids[0]), ids[0], token, durationMS(lease)).Slice()
		if err != nil {
			return nil, 0, time.Time{}, fmt.Errorf("outbox: claim item: %w", err)
		}
		switch msFrom(res[0]) {
		case 0:
			continue // delivered or claimed meanwhile, or a stale entry: look again
		case 1:
			return nil, max(time.Duration(msFrom(res[1]))*time.Millisecond, time.Millisecond), time.Time{}, nil
		}
		it, err := decodeItem(ids[0], token, res[2:])
		if err != nil {
			// The claimed item cannot be tried; the caller fails it.
			return &Item{ID: ids[0], owner: token}, 0, time.Time{}, fmt.Errorf("%w: %w", errUndecodable, err)
		}
		return it, 0, redisTime(msFrom(res[1])), nil
	}
}

// decodeItem builds an item from a hash's field/value list.
func decodeItem(id, token string, fields []any) (*Item, error) {
	h := map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		h[fmt.Sprint(fields[i])] = fmt.Sprint(fields[i+1])
	}
	var d itemData
	if err := json.Unmarshal([]byte(h["data"]), &d); err != nil {
		return nil, fmt.Errorf("outbox: decode item %s: %w", id, err)
	}
	it := &Item{ID: id, Message: d.Message, Parts: d.Parts, File: d.File, owner: token,
		Created: redisTime(msFrom(h["created"])), Attempts: int(msFrom(h["attempts"]))}
	sent := int(msFrom(h["sent"]))
	for i := range sent {
		it.Sent = append(it.Sent, h["id:"+strconv.Itoa(i)])
	}
	if sent > len(d.Parts) {
		return nil, fmt.Errorf("outbox: item %s records %d of %d parts posted", id, sent, len(d.Parts))
	}
	return it, nil
}

// postedScript records that one part was posted and renews the lease;
// the last part finishes the item, in the same step. KEYS: due, item.
// ARGV: id, token, part, platform id, lease (ms). It returns -1 when the
// claim is no longer this one's (or the part is not the next one), 0 when
// parts remain, 1 when the item is delivered.
var postedScript = redis.NewScript(nowMS + `
if redis.call('HGET', KEYS[2], 'owner') ~= ARGV[2] then return -1 end
local sent = tonumber(redis.call('HGET', KEYS[2], 'sent'))
if sent ~= tonumber(ARGV[3]) then return -1 end
redis.call('HSET', KEYS[2], 'sent', sent + 1, 'id:' .. sent, ARGV[4])
if sent + 1 >= tonumber(redis.call('HGET', KEYS[2], 'total')) then
  redis.call('HSET', KEYS[2], 'owner', '', 'outcome', 'sent', 'finished', now)
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 1
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[5]), ARGV[1])
return 0
`)

// posted records that the next part of it was posted as platform message
// id, and renews the claim for lease. It reports whether the item is now
// delivered (and finished); errLeaseLost when the claim is no longer ours.
func (s *store) posted(ctx context.Context, it *Item, id string, lease time.Duration) (bool, error) {
	part := len(it.Sent)
	n, err := postedScript.Run(ctx, s.client, s.keys(it.ID), it.ID, it.owner, part, id, durationMS(lease), durationMS(doneTTL)).Int64()
	if err != nil {
		return false, fmt.Errorf("outbox: record part %d of %d: %w", part+1, len(it.Parts), err)
	}
	if n < 0 {
		return false, errLeaseLost
	}
	it.Sent = append(it.Sent, id)
	return n == 1, nil
}

// releaseScript gives a claim back, due again after a delay. KEYS: due,
// item. ARGV: id, token, delay (ms). It returns 0 when the claim was not
// this one's.
var releaseScript = redis.NewScript(nowMS + `
if redis.call('HGET', KEYS[2], 'owner') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[2], 'owner', '')
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
return 1
`)

// release makes it due again after delay, for any replica.
func (s *store) release(ctx context.Context, it *Item, delay time.Duration) error {
	n, err := releaseScript.Run(ctx, s.client, s.keys(it.ID), it.ID, it.owner, durationMS(delay)).Int64()
	if err != nil {
		return fmt.Errorf("outbox: release item: %w", err)
	}
	if n == 0 {
		return errLeaseLost
	}
	return nil
}

// failScript ends a claimed item as failed, keeping it (with the ids of
// the parts that were posted) for doneTTL. KEYS: due, item. ARGV: id,
// token, ttl (ms), reason.
var failScript = redis.NewScript(nowMS + `
if redis.call('HGET', KEYS[2], 'owner') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[2], 'owner', '', 'outcome', 'failed', 'reason', ARGV[4], 'finished', now)
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('ZREM', KEYS[1], ARGV[1])
return 1
`)

// fail ends it as failed, for why.
func (s *store) fail(ctx context.Context, it *Item, why string) error {
	n, err := failScript.Run(ctx, s.client, s.keys(it.ID), it.ID, it.owner, durationMS(doneTTL), why).Int64()
	if err != nil {
		return fmt.Errorf("outbox: fail item: %w", err)
	}
	if n == 0 {
		return errLeaseLost
	}
	return nil
}

// pending counts the items queued (claimed or waiting).
func (s *store) pending(ctx context.Context) (int64, error) {
	n, err := s.client.ZCard(ctx, s.due()).Result()
	if err != nil {
		return 0, fmt.Errorf("outbox: count pending: %w", err)
	}
	return n, nil
}

// Record is what the outbox keeps of a finished item, for an operator
// (and tests) to look up for a day.
type Record struct {
	Outcome string   // "sent" or "failed"; "" while the item is pending
	Sent    []string // the platform's ids of the parts posted
	Parts   int
}

// lookup reads what is stored of item id; ok is false when nothing is.
func (s *store) lookup(ctx context.Context, id string) (Record, bool, error) {
	h, err := s.client.HGetAll(ctx, s.item(id)).Result()
	if err != nil {
		return Record{}, false, fmt.Errorf("outbox: read item: %w", err)
	}
	if len(h) == 0 {
		return Record{}, false, nil
	}
	r := Record{Outcome: h["outcome"], Parts: int(msFrom(h["total"]))}
	for i := range int(msFrom(h["sent"])) {
		r.Sent = append(r.Sent, h["id:"+strconv.Itoa(i)])
	}
	return r, true, nil
}
