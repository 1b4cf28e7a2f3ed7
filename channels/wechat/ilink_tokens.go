package wechat

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// contextTokens keeps, per bot and user, the newest context_token with its
// time and the number of messages sent since the user last wrote. A sorted
// set beside the hash orders the users by their last message, so that a
// user idle past tokenTTL (whose token is long dead) is dropped when
// another writes: the hash holds only users heard from within tokenTTL,
// instead of every user the bot ever had while any one stays active.
type contextTokens struct {
	client redis.UniversalClient
	prefix string
	now    func() time.Time // time.Now unless a test sets it
}

// tokenTTL outlives iLink's reply window (24 h after the user's message).
const tokenTTL = 48 * time.Hour

// pruneBatch bounds the idle users one record drops, so a record stays
// cheap after a long pause; the next records drop the rest.
const pruneBatch = 100

func (t *contextTokens) key(bot string) string {
	return t.prefix + "wechat:ilink:{" + bot + "}:ctx"
}

func (t *contextTokens) seenKey(bot string) string {
	return t.prefix + "wechat:ilink:{" + bot + "}:ctx-seen"
}

func (t *contextTokens) newestKey(bot string) string {
	return t.prefix + "wechat:ilink:{" + bot + "}:ctx-newest"
}

// recordScript stores a user's token and drops up to ARGV[5] users idle
// past the token's life. The keys share the bot's hash tag.
var recordScript = redis.NewScript(`
local user, token, now, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 't:'..user, token, 'a:'..user, ARGV[3], 'n:'..user, 0)
redis.call('ZADD', KEYS[2], now, user)
local idle = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - ttl, 'LIMIT', 0, tonumber(ARGV[5]))
for _, u in ipairs(idle) do
  redis.call('HDEL', KEYS[1], 't:'..u, 'a:'..u, 'n:'..u)
  redis.call('ZREM', KEYS[2], u)
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('SET', KEYS[3], ARGV[3], 'PX', ttl)
return #idle
`)

func (t *contextTokens) record(ctx context.Context, bot, user, token string) error {
	now := time.Now
	if t.now != nil {
		now = t.now
	}
	return recordScript.Run(ctx, t.client, []string{t.key(bot), t.seenKey(bot), t.newestKey(bot)},
		user, token, now().UnixMilli(), tokenTTL.Milliseconds(), pruneBatch).Err()
}

func (t *contextTokens) latest(ctx context.Context, bot, user string) (string, time.Time, error) {
	vals, err := t.client.HMGet(ctx, t.key(bot), "t:"+user, "a:"+user).Result()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("wechat: read context token: %w", err)
	}
	token, _ := vals[0].(string)
	ms, _ := vals[1].(string)
	n, _ := strconv.ParseInt(ms, 10, 64)
	var at time.Time
	if n > 0 {
		at = time.UnixMilli(n)
	}
	return token, at, nil
}

func (t *contextTokens) countSend(ctx context.Context, bot, user string) (int64, error) {
	return t.client.HIncrBy(ctx, t.key(bot), "n:"+user, 1).Result()
}

func (t *contextTokens) newest(ctx context.Context, bot string) (time.Time, bool, error) {
	ms, err := t.client.Get(ctx, t.newestKey(bot)).Int64()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	return time.UnixMilli(ms), true, nil
}

// NewestContextToken reports when the newest context_token of an iLink
// bot arrived (false when none is known), for `parley wechat status`.
func NewestContextToken(ctx context.Context, client redis.UniversalClient, prefix, bot string) (time.Time, bool, error) {
	return (&contextTokens{client: client, prefix: prefix}).newest(ctx, bot)
}
