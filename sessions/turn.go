package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/internal/pipescript"
)

// claimScript starts a turn in one round trip: it takes the lock when
// something is queued and returns the oldest message with the whole
// history. The history comes back as one string of "<len>:<entry>" frames
// rather than as a list, so that the reply costs the client the same few
// allocations at any length.
//
// The room's cursor and ambient buffer (see room.go) come with it, so that
// reading the room costs the turn no round trip of its own.
//
// A lock that already holds the token is taken: it is this claimant's own,
// from a claim whose reply was lost (claimtoken.go).
//
// KEYS: lock, inbox, history, approval, live, room, ambient. ARGV: token,
// lock TTL ms.
// Returns {0} (nothing queued), {-1, lock PTTL ms} (held by another), or
// {1, oldest message, framed history, messages queued, approval exists,
// recorded live reply or false, room cursor (empty when none), ambient
// entries}.
var claimScript = redis.NewScript(`
local head = redis.call('LINDEX', KEYS[2], 0)
if not head then return {0} end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {-1, redis.call('PTTL', KEYS[1])} end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local h = redis.call('LRANGE', KEYS[3], 0, -1)
local framed = {}
for i = 1, #h do
  framed[2*i-1] = #h[i] .. ':'
  framed[2*i] = h[i]
end
local liveroom = redis.call('MGET', KEYS[5], KEYS[6])
return {1, head, table.concat(framed), redis.call('LLEN', KEYS[2]), redis.call('EXISTS', KEYS[4]), liveroom[1],
  liveroom[2] or '', redis.call('LRANGE', KEYS[7], 0, -1)}
`)

// Claim implements Store.
func (s *RedisStore) Claim(ctx context.Context, conv string) (*Claim, error) {
	token, err := s.claimToken(conv)
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	res, err := claimScript.Run(ctx, s.client, []string{s.key(conv, "lock"), s.key(conv, "inbox"), s.key(conv, "history"), s.key(conv, "approval"),
		s.key(conv, liveReplyPart), s.key(conv, "room"), s.key(conv, "ambient")},
		token, s.opts.LockTTL.Milliseconds()).Slice()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			s.uncertain.keep(conv, token) // it may have run: see claimtoken.go
		}
		return nil, fmt.Errorf("sessions: claim: %w", err)
	}
	status, _ := res[0].(int64)
	switch {
	case status == 0:
		return nil, nil
	case status < 0 && len(res) == 2:
		pttl, _ := res[1].(int64)
		expires := time.Duration(pttl) * time.Millisecond
		if pttl < 0 { // a lock without expiry, which Parley never sets
			expires = s.opts.LockTTL
		}
		return nil, &LockedError{Expires: expires}
	case status != 1 || len(res) != 8:
		return nil, fmt.Errorf("sessions: claim: unexpected reply %v", res)
	}
	item, _ := res[1].(string)
	blob, _ := res[2].(string)
	queued, _ := res[3].(int64)
	approval, _ := res[4].(int64)
	cursor, _ := res[6].(string)
	ambient, _ := res[7].([]any)
	history, err := parseFramed(blob)
	if err != nil {
		// The lock was taken for nothing: give it back at once.
		_ = releaseScript.Run(context.WithoutCancel(ctx), s.client, []string{s.key(conv, "lock")}, token).Err()
		return nil, err
	}
	live, _ := res[5].(string) // nil (no record) reads as ""
	return &Claim{Lock: s.held(ctx, conv, token, sent), Item: []byte(item), History: history, Queued: queued, Approval: approval == 1,
		LiveReply: liveReplyOf(live, []byte(item)), Room: s.roomState(cursor, ambient)}, nil
}

// completeScript ends a turn in one round trip, and only while the caller
// still owns the lock: a holder whose lock expired must not write a turn
// another replica may already be writing. It removes the message from the
// inbox, appends the turn, refreshes the TTL, trims, and releases the
// lock. It also leaves a receipt for one lock TTL, so that a holder whose
// reply was lost on the way back and who runs it again learns that its
// turn is written instead of believing its lock lost; and it forgets the
// turn's live reply (RecordLiveReply), answered now.
//
// The turn's room write (WriteWithTurn) is applied in the same step, so
// that it lands with the turn and never without it, and once.
//
// KEYS: history, inbox, lock, receipt, live, room cursor, ambient. ARGV:
// token, history TTL ms, max messages, item, lock TTL ms, has a room write
// (0/1), roomLua's 7 arguments, messages…
// Returns {-1} (lock lost) or {trimmed 0/1, messages still queued}.
var completeScript = redis.NewScript(roomLua + `
if redis.call('GET', KEYS[3]) ~= ARGV[1] then
  local receipt = redis.call('GET', KEYS[4])
  if receipt then return {tonumber(receipt), redis.call('LLEN', KEYS[2])} end
  return {-1}
end
if ARGV[4] ~= '' then
  local head = redis.call('LPOP', KEYS[2])
  if head and head ~= ARGV[4] then
    redis.call('LPUSH', KEYS[2], head)
    redis.call('PEXPIRE', KEYS[2], ARGV[2]) -- the pop may have emptied it
  end
end
if ARGV[6] == '1' then applyRoom(KEYS[6], KEYS[7], 7) end
local trimmed = 0
if #ARGV > 13 then
  local n = redis.call('RPUSH', KEYS[1], unpack(ARGV, 14))
  local max = tonumber(ARGV[3])
  if n > max then
    redis.call('LTRIM', KEYS[1], -max, -1)
    trimmed = 1
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
redis.call('DEL', KEYS[3], KEYS[5])
redis.call('SET', KEYS[4], trimmed, 'PX', ARGV[5])
return {trimmed, redis.call('LLEN', KEYS[2])}
`)

// Along adds to p, the pipeline that carries a completion, a write of the
// turn to keys outside the conversation's hash slot (the usage report's
// hour, say), so that the write costs no round trip of its own. It keeps
// the commands it queues and reads their results once Complete returns:
// each command's outcome is its own, and the pipeline's commands run
// whether or not the completion's script finds the lock still held.
type Along func(p redis.Pipeliner)

// Complete implements Store.
func (s *RedisStore) Complete(ctx context.Context, lock *Lock, item []byte, msgs []Message, along ...Along) (Completion, error) {
	args := make([]any, 0, 6+roomArgCount+len(msgs))
	args = append(args, lock.token, s.opts.HistoryTTL.Milliseconds(), s.opts.MaxMessages, item, s.opts.LockTTL.Milliseconds())
	lock.mu.Lock()
	room := lock.room
	lock.mu.Unlock()
	if room != nil {
		args = append(append(args, "1"), s.roomArgs(*room)...)
	} else {
		args = append(append(args, "0"), s.roomArgs(RoomWrite{})...)
	}
	for i := range msgs {
		b, err := json.Marshal(&msgs[i])
		if err != nil {
			return Completion{}, fmt.Errorf("sessions: encode message: %w", err)
		}
		args = append(args, b)
	}
	keys := []string{s.key(lock.conv, "history"), s.key(lock.conv, "inbox"), s.key(lock.conv, "lock"), s.key(lock.conv, "done:"+lock.token),
		s.key(lock.conv, liveReplyPart), s.key(lock.conv, "room"), s.key(lock.conv, "ambient")}
	var cmd *redis.Cmd
	if len(along) == 0 {
		cmd = completeScript.Run(ctx, s.client, keys, args...)
	} else {
		cmd = s.completeAlong(ctx, keys, args, along)
	}
	res, err := cmd.Int64Slice()
	if err != nil {
		return Completion{}, fmt.Errorf("sessions: complete turn: %w", err)
	}
	lock.mu.Lock()
	lock.room = nil // written with the turn, or never: either way, done
	lock.mu.Unlock()
	switch {
	case len(res) == 1 && res[0] < 0:
		lock.markLost()
		lock.end()
		return Completion{}, ErrLockLost
	case len(res) != 2:
		return Completion{}, fmt.Errorf("sessions: complete turn: unexpected reply %v", res)
	}
	lock.end() // released by the script
	return Completion{Trimmed: res[0] == 1, Queued: res[1]}, nil
}

// completeAlong runs the completion's script with the writes along queue,
// in one pipeline: one round trip on a single Redis; on a Cluster, go-redis
// sends each node its share at once, so the scripts never span a slot.
func (s *RedisStore) completeAlong(ctx context.Context, keys []string, args []any, along []Along) *redis.Cmd {
	p := s.client.Pipeline()
	// What rides with the turn (usage, a post's place in its chat's pace)
	// stands on its own; it goes first, as it always has.
	for _, a := range along {
		a(p)
	}
	result := pipescript.Queue(ctx, p, s.client, completeScript, keys, args...)
	// Exec reports the first command that failed; the completion's outcome
	// is read from its own command (run alone if Redis had forgotten the
	// script), the others' by whoever queued them.
	_, _ = p.Exec(ctx)
	return result(ctx)
}
