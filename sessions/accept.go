package sessions

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// acceptScript is the whole webhook side of a message in one round trip:
// the required mark, the de-dup record, the marks and the enqueue, so that
// a crash can never leave an id marked as seen without its message queued.
// The inbox is checked against its limit in the same step, so that
// replicas appending at once cannot overshoot it, and it expires with the
// history: an abandoned queue does not live forever. The common case costs
// the fewest commands: the de-dup record is one SET NX, and the message
// is appended and taken back off when that made the inbox too long
// (nothing else can see the inbox in between).
//
// An arrival from the person the conversation's turn has asked a question
// (Ask) is that person's answer: it goes to the answers list the waiting
// turn reads, not to the inbox, where it would wait behind the very turn
// that waits for it. The check is one GET inside the script, so a message
// costs no round trip more for it.
//
// KEYS: inbox, asking, answers, [seen], [required mark], marks…
// ARGV: item, limit, history TTL ms, de-dup TTL ms, has seen (0/1),
// has required mark (0/1), sender, answer only (0/1).
// Returns the inbox length, or -1 (full), -2 (duplicate), -3 (unmarked),
// -4 (answered), -5 (not asked).
var acceptScript = redis.NewScript(`
local k = 4
local seen, required
if ARGV[5] == '1' then seen = KEYS[k]; k = k + 1 end
if ARGV[6] == '1' then required = KEYS[k]; k = k + 1 end
local asked = ARGV[7] ~= '' and redis.call('GET', KEYS[2]) == ARGV[7]
if ARGV[8] == '1' and not asked then return -5 end
if required and not asked and redis.call('EXISTS', required) == 0 then return -3 end
if seen and not redis.call('SET', seen, '1', 'NX', 'PX', ARGV[4]) then return -2 end
if asked then
  redis.call('RPUSH', KEYS[3], ARGV[1])
  redis.call('PEXPIRE', KEYS[3], redis.call('PTTL', KEYS[2]))
  return -4
end
for i = k, #KEYS do redis.call('SET', KEYS[i], '1', 'PX', ARGV[3]) end
local n = redis.call('RPUSH', KEYS[1], ARGV[1])
if n > tonumber(ARGV[2]) then
  redis.call('RPOP', KEYS[1])
  return -1
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return n
`)

// Accept implements Store. Every key it touches carries conv's hash tag:
// the de-dup record of an id lives with the conversation its message
// belongs to, which a platform's re-delivery never changes.
func (s *RedisStore) Accept(ctx context.Context, conv string, a Arrival) (Acceptance, error) {
	keys := make([]string, 0, 5+len(a.Marks))
	keys = append(keys, s.key(conv, "inbox"), s.key(conv, "asking"), s.key(conv, "answers"))
	hasSeen, hasRequired, answerOnly := "0", "0", "0"
	if a.AnswerOnly {
		answerOnly = "1"
	}
	if a.ID != "" {
		keys = append(keys, s.key(conv, "seen:"+a.ID))
		hasSeen = "1"
	}
	if a.RequireMark != "" {
		keys = append(keys, s.markKey(conv, a.RequireMark))
		hasRequired = "1"
	}
	for _, m := range a.Marks {
		keys = append(keys, s.markKey(conv, m))
	}
	n, err := acceptScript.Run(ctx, s.client, keys, a.Item, a.Limit,
		s.opts.HistoryTTL.Milliseconds(), s.opts.DedupeTTL.Milliseconds(), hasSeen, hasRequired,
		a.Sender, answerOnly).Int64()
	if err != nil {
		return 0, fmt.Errorf("sessions: accept: %w", err)
	}
	switch n {
	case -1:
		return QueueFull, nil
	case -2:
		return Duplicate, nil
	case -3:
		return Unmarked, nil
	case -4:
		return Answered, nil
	case -5:
		return NotAsked, nil
	}
	return Queued, nil
}

// markKey is the key of one mark of conv.
func (s *RedisStore) markKey(conv, mark string) string { return s.key(conv, "mark:"+mark) }
