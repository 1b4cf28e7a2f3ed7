package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A write tool's call is recorded under a key of its conversation, so that
// a message run again (its lock was lost mid-turn, another replica took it
// over) does not run the same write twice. The record goes through two
// states, each set in one atomic step: claimed (by one attempt, before the
// tool runs) and done (with the tool's result, by that attempt only).

// CallState is what BeginCall found.
type CallState int

const (
	// CallClaimed: the call was not made before; this attempt owns it and
	// runs it, then records the result with EndCall.
	CallClaimed CallState = iota
	// CallDone: an earlier attempt made the call; Result is what it
	// returned.
	CallDone
	// CallUnfinished: an earlier attempt claimed the call and has not
	// recorded a result: it is still running, or died while running it.
	// Whether the write happened is unknown, so it is not made again.
	CallUnfinished
)

// CallRecord is BeginCall's answer.
type CallRecord struct {
	State CallState
	// Claim identifies this attempt's claim (CallClaimed), for EndCall.
	Claim string
	// Result is what the earlier attempt recorded (CallDone).
	Result []byte
}

// Record values: "claimed:TOKEN" while the call runs, "done:RESULT" after.
const (
	callClaimedPrefix = "claimed:"
	callDonePrefix    = "done:"
)

// beginCallScript claims KEYS[1] with ARGV[1] for ARGV[2] ms unless it is
// set, and returns what it holds.
var beginCallScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
`)

// endCallScript replaces the claim ARGV[1] with the result ARGV[2], for
// ARGV[3] ms, if the claim is still the record's.
var endCallScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`)

// ErrCallNotClaimed is EndCall's error when the claim is no longer the
// record's (it expired, which takes the de-dup TTL).
var ErrCallNotClaimed = errors.New("sessions: the tool call's claim is gone")

// BeginCall claims the tool call key of conv in one step, or reports what
// an earlier attempt left there. key names the call (see the agent's call
// keys); records live as long as a de-dup record (Options.DedupeTTL).
func (s *RedisStore) BeginCall(ctx context.Context, conv, key string) (CallRecord, error) {
	token, err := newToken()
	if err != nil {
		return CallRecord{}, err
	}
	claim := callClaimedPrefix + token
	v, err := beginCallScript.Run(ctx, s.client, []string{s.key(conv, "call:"+key)}, claim, s.opts.DedupeTTL.Milliseconds()).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return CallRecord{State: CallClaimed, Claim: claim}, nil
	case err != nil:
		return CallRecord{}, fmt.Errorf("sessions: claim a tool call: %w", err)
	case strings.HasPrefix(v, callDonePrefix):
		return CallRecord{State: CallDone, Result: []byte(v[len(callDonePrefix):])}, nil
	}
	return CallRecord{State: CallUnfinished}, nil
}

// EndCall records result for the call BeginCall claimed with claim, in one
// step, provided the claim is still the record's.
func (s *RedisStore) EndCall(ctx context.Context, conv, key, claim string, result []byte) error {
	n, err := endCallScript.Run(ctx, s.client, []string{s.key(conv, "call:"+key)}, claim, callDonePrefix+string(result), s.opts.DedupeTTL.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("sessions: record a tool call: %w", err)
	}
	if n == 0 {
		return ErrCallNotClaimed
	}
	return nil
}
