package sessions

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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
// written by the turn's completion, in its script, and only when it writes
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
	// WriteWithTurn keeps w, the write of the turn that holds lock, for
	// that lock's Complete, which applies it in the same step as the
	// turn: only if it writes the turn, and once however often it is
	// sent (a Complete tried again finds its receipt instead).
	WriteWithTurn(lock *Lock, w RoomWrite)
	// WriteRoom applies w at once, for a turn whose completion is not a
	// Complete (one paused for an approval, whose record holds the room it
	// read).
	WriteRoom(ctx context.Context, conv string, w RoomWrite) error
}

var _ Rooms = (*RedisStore)(nil)

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

// roomLua applies a RoomWrite: a function shared by roomScript and the
// completion's script (turn.go), which applies a turn's write in the same
// step as the turn. Its arguments start at ARGV[i]: cursor, cursor TTL ms,
// taken, entry, max entries, max bytes, ambient TTL ms.
const roomLua = `
local function applyRoom(cursorKey, ambientKey, i)
  if ARGV[i] ~= '' then redis.call('SET', cursorKey, ARGV[i], 'PX', ARGV[i+1]) end
  local taken = tonumber(ARGV[i+2])
  if taken > 0 then redis.call('LTRIM', ambientKey, taken, -1) end
  if ARGV[i+3] == '' then return end
  local n = redis.call('RPUSH', ambientKey, ARGV[i+3])
  local maxn = tonumber(ARGV[i+4])
  if n > maxn then redis.call('LTRIM', ambientKey, -maxn, -1) end
  local all = redis.call('LRANGE', ambientKey, 0, -1)
  local total = 0
  for j = 1, #all do total = total + #all[j] end
  local drop = 0
  while total > tonumber(ARGV[i+5]) and drop < #all do
    drop = drop + 1
    total = total - #all[drop]
  end
  if drop > 0 then redis.call('LTRIM', ambientKey, drop, -1) end
  redis.call('PEXPIRE', ambientKey, ARGV[i+6])
end
`

// roomArgCount is how many arguments roomArgs gives.
const roomArgCount = 7

// roomScript applies a RoomWrite by itself (WriteRoom). KEYS: cursor,
// ambient. ARGV: roomLua's.
var roomScript = redis.NewScript(roomLua + `
applyRoom(KEYS[1], KEYS[2], 1)
return 1
`)

// roomKeys are conv's cursor and ambient buffer.
func (s *RedisStore) roomKeys(conv string) []string {
	return []string{s.key(conv, "room"), s.key(conv, "ambient")}
}

// roomArgs are roomLua's arguments for w (w zero: a write of nothing).
func (s *RedisStore) roomArgs(w RoomWrite) []any {
	entry := ""
	if len(w.Ambient) > 0 {
		entry = strconv.FormatInt(time.Now().UnixMilli(), 10) + "|" + string(w.Ambient)
	}
	return []any{w.Cursor, s.opts.HistoryTTL.Milliseconds(), w.Taken, entry,
		s.opts.AmbientMessages, s.opts.AmbientBytes, s.opts.AmbientAge.Milliseconds()}
}

// WriteWithTurn implements Rooms. A write that changes nothing is not
// kept.
func (s *RedisStore) WriteWithTurn(lock *Lock, w RoomWrite) {
	if w.IsZero() {
		return
	}
	lock.mu.Lock()
	lock.room = &w
	lock.mu.Unlock()
}

// WriteRoom implements Rooms.
func (s *RedisStore) WriteRoom(ctx context.Context, conv string, w RoomWrite) error {
	if w.IsZero() {
		return nil
	}
	if err := roomScript.Run(ctx, s.client, s.roomKeys(conv), s.roomArgs(w)...).Err(); err != nil {
		return fmt.Errorf("sessions: write the room: %w", err)
	}
	return nil
}
