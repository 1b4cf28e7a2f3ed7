package sessions

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/internal/pipescript"
)

// What a conversation keeps of its room between turns, under its hash tag
// with the rest of it:
//
//	conv:{KEY}:room     the cursor of the last read of the room (a Slack
//	                    ts, a Feishu time), where the next read starts
//	conv:{KEY}:ambient  messages the bot received there but was not
//	                    addressed in, on platforms that cannot read back,
//	                    kept for the next addressed turn
//
// Both are read under the conversation's lock at the start of a turn and
// written with the turn's completion, and only when the completion wrote
// the turn: a turn that is not written (its lock was lost, its replica
// died) leaves them as they were, so that whoever answers the message
// next reads the same room again: nothing of it is lost, and nothing is
// read twice into the history.

// Bounds of a conversation's ambient buffer, when Options leaves them zero.
const (
	DefaultAmbientMessages = 50
	DefaultAmbientBytes    = 64 << 10
	DefaultAmbientAge      = 6 * time.Hour
)

// RoomState is what a conversation kept of its room.
type RoomState struct {
	// Cursor is the last read's cursor ("" before the first).
	Cursor string
	// Ambient are the ambient messages still within their age, oldest
	// first, as AmbientEntry was given them.
	Ambient [][]byte
	// Taken counts the buffer's entries this read covered, those too old
	// included: RoomWrite.Taken drops as many.
	Taken int
}

// RoomWrite is what a turn changes of its conversation's room.
type RoomWrite struct {
	// Cursor replaces the cursor ("" keeps it).
	Cursor string
	// Taken drops this many ambient entries from the head of the buffer:
	// those the turn read (RoomState.Taken).
	Taken int
	// Ambient, when set, is one ambient message to keep (the write of a
	// message that is not answered).
	Ambient []byte
}

// IsZero reports a write that changes nothing.
func (w RoomWrite) IsZero() bool { return w.Cursor == "" && w.Taken == 0 && len(w.Ambient) == 0 }

// Rooms keeps the room of each conversation; *RedisStore implements it.
type Rooms interface {
	// Room reads conv's cursor and ambient buffer (one round trip; a
	// Claim brings them along with it, in Claim.Room).
	Room(ctx context.Context, conv string) (RoomState, error)
	// RoomAlong returns the write w of the turn that holds lock, to ride
	// with its Complete: it is applied only if that Complete wrote the
	// turn, and at most once however often it is sent (a Complete tried
	// again may send it again).
	RoomAlong(lock *Lock, w RoomWrite) RoomAlong
	// WriteRoom applies w at once, for a turn whose completion is not a
	// Complete (one paused for an approval, whose record holds the room it
	// read).
	WriteRoom(ctx context.Context, conv string, w RoomWrite) error
}

var _ Rooms = (*RedisStore)(nil)

// RoomAlong is a room write riding with a Complete: Along goes with it
// (nil: nothing to write), and Settle, called once that Complete has
// returned, reads what became of it (and runs it alone when Redis had
// forgotten the script, which means it did not run).
type RoomAlong struct {
	Along  Along
	Settle func(context.Context) error
}

// Room implements Rooms.
func (s *RedisStore) Room(ctx context.Context, conv string) (RoomState, error) {
	p := s.client.Pipeline()
	cur := p.Get(ctx, s.key(conv, "room"))
	amb := p.LRange(ctx, s.key(conv, "ambient"), 0, -1)
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return RoomState{}, fmt.Errorf("sessions: read the room: %w", err)
	}
	entries := make([]any, 0, len(amb.Val()))
	for _, e := range amb.Val() {
		entries = append(entries, e)
	}
	return s.roomState(cur.Val(), entries), nil
}

// roomState is the room of a cursor and the ambient buffer's entries,
// those within their age kept.
func (s *RedisStore) roomState(cursor string, entries []any) RoomState {
	st := RoomState{Cursor: cursor}
	oldest := time.Now().Add(-s.opts.AmbientAge).UnixMilli()
	for _, v := range entries {
		st.Taken++
		e, _ := v.(string)
		at, body, ok := strings.Cut(e, "|")
		ms, err := strconv.ParseInt(at, 10, 64)
		if !ok || err != nil || ms < oldest {
			continue // too old, or not an entry: dropped with the rest
		}
		st.Ambient = append(st.Ambient, []byte(body))
	}
	return st
}

// roomScript applies a RoomWrite once, and only with its turn: it runs
// in the completion's pipeline just before the completion's script, while
// the turn's holder still holds the lock (KEYS[5] is its token), so that
// no other holder can claim the conversation between the turn's release
// and its room's write and read the same room again. Run alone later (a
// Redis that had forgotten the script), it finds the completion's receipt
// (KEYS[1]) instead, which exists only if the completion wrote the turn.
// KEYS[2] marks the write as done, for as long as the receipt lives.
//
// KEYS: receipt, marker, cursor, ambient, lock. ARGV: cursor, cursor TTL
// ms, taken, entry, max entries, max bytes, ambient TTL ms, marker TTL ms,
// check the turn (1/0), token.
// Returns 0 (the turn was not written), 2 (already applied) or 1.
var roomScript = redis.NewScript(`
if ARGV[9] == '1' then
  if redis.call('GET', KEYS[5]) ~= ARGV[10] and redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
  if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[8]) then return 2 end
end
if ARGV[1] ~= '' then redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2]) end
local taken = tonumber(ARGV[3])
if taken > 0 then redis.call('LTRIM', KEYS[4], taken, -1) end
if ARGV[4] ~= '' then
  local n = redis.call('RPUSH', KEYS[4], ARGV[4])
  local maxn = tonumber(ARGV[5])
  if n > maxn then redis.call('LTRIM', KEYS[4], -maxn, -1) end
  local all = redis.call('LRANGE', KEYS[4], 0, -1)
  local total = 0
  for i = 1, #all do total = total + #all[i] end
  local drop = 0
  while total > tonumber(ARGV[6]) and drop < #all do
    drop = drop + 1
    total = total - #all[drop]
  end
  if drop > 0 then redis.call('LTRIM', KEYS[4], drop, -1) end
  redis.call('PEXPIRE', KEYS[4], ARGV[7])
end
return 1
`)

// roomArgs are roomScript's keys and arguments for w on conv; check makes
// it wait for the completion's receipt of token.
func (s *RedisStore) roomArgs(conv, token string, w RoomWrite, check bool) ([]string, []any) {
	entry := ""
	if len(w.Ambient) > 0 {
		entry = strconv.FormatInt(time.Now().UnixMilli(), 10) + "|" + string(w.Ambient)
	}
	flag := "0"
	if check {
		flag = "1"
	}
	keys := []string{s.key(conv, "done:"+token), s.key(conv, "room-written:"+token), s.key(conv, "room"), s.key(conv, "ambient"), s.key(conv, "lock")}
	return keys, []any{w.Cursor, s.opts.HistoryTTL.Milliseconds(), w.Taken, entry,
		s.opts.AmbientMessages, s.opts.AmbientBytes, s.opts.AmbientAge.Milliseconds(), s.opts.LockTTL.Milliseconds(), flag, token}
}

// RoomAlong implements Rooms. A write that changes nothing queues nothing
// (the Along is nil).
func (s *RedisStore) RoomAlong(lock *Lock, w RoomWrite) RoomAlong {
	if w.IsZero() {
		return RoomAlong{}
	}
	keys, args := s.roomArgs(lock.conv, lock.token, w, true)
	var result func(context.Context) *redis.Cmd
	return RoomAlong{
		Along: func(p redis.Pipeliner) {
			result = pipescript.Queue(context.Background(), p, s.client, roomScript, keys, args...)
		},
		Settle: func(ctx context.Context) error {
			if result == nil {
				return nil
			}
			if err := result(ctx).Err(); err != nil {
				return fmt.Errorf("sessions: write the room: %w", err)
			}
			return nil
		},
	}
}

// WriteRoom implements Rooms.
func (s *RedisStore) WriteRoom(ctx context.Context, conv string, w RoomWrite) error {
	if w.IsZero() {
		return nil
	}
	keys, args := s.roomArgs(conv, "", w, false)
	if err := roomScript.Run(ctx, s.client, keys, args...).Err(); err != nil {
		return fmt.Errorf("sessions: write the room: %w", err)
	}
	return nil
}
