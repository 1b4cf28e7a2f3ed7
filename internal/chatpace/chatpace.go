// Package chatpace spaces the posts to one chat over every replica, to
// the rate its platform publishes: a split answer goes out paced, not in a
// burst that gets the bot rate limited or banned, and two replicas
// answering in one chat share its budget. The outbox paces its posts with
// it, and an adapter posting outside the outbox (a live reply's message)
// takes its slots from the same budget.
//
// It is GCRA, as in the quota package, used as a reservation: each post
// takes the next free slot of its chat and waits for it, so no replica
// polls. A chat's keys share one hash tag, so each script runs on one
// slot of a Redis Cluster, and time is Redis's own clock. When the
// platform answers 429, the chat is held for its Retry-After: every
// replica waits, also one that had already reserved a slot.
package chatpace

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/internal/pipescript"
	"github.com/parleyhq/parley/retry"
)

// Pacer paces chats in Client, under keys starting with Prefix.
type Pacer struct {
	Client redis.UniversalClient
	Prefix string
}

// Keys are a chat's next free slot and its hold.
func (p Pacer) Keys(channel, workspace, chat string) []string {
	base := p.Prefix + "pace:{" + channel + ":" + workspace + ":" + chat + "}"
	return []string{base, base + ":hold"}
}

// reserveScript takes the next slot of a chat. KEYS: slot, hold. ARGV:
// interval (µs), burst. It returns the wait (µs) until the slot, or
// until the hold ends if that is later.
var reserveScript = redis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local wait = tat - (tonumber(ARGV[2]) - 1) * interval - now
if wait < 0 then wait = 0 end
local new = tat + interval
redis.call('SET', KEYS[1], string.format('%d', new), 'PX', math.floor((new - now) / 1000) + 1)
local hold = redis.call('PTTL', KEYS[2]) * 1000
if hold > wait then wait = hold end
return wait
`)

// holdScript holds a chat for ARGV[1] ms, unless it is held longer.
// KEYS: hold.
var holdScript = redis.NewScript(`
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
end
return 1
`)

// Wait blocks until the chat may be posted to, one post every every
// (burst at once after a quiet spell). A Redis failure is returned; the
// caller posts unpaced rather than not at all.
func (p Pacer) Wait(ctx context.Context, channel, workspace, chat string, every time.Duration, burst int) error {
	if every <= 0 {
		return nil
	}
	keys := p.Keys(channel, workspace, chat)
	wait, err := reserveScript.Run(ctx, p.Client, keys, max(every.Microseconds(), 1), max(burst, 1)).Int64()
	if err != nil {
		return fmt.Errorf("pace: %w", err)
	}
	return p.sleep(ctx, keys, wait)
}

// Queue reserves the chat's next slot in pipe, a pipeline that carries
// another write (the turn's completion), so that the reservation costs no
// round trip of its own. Once pipe has run, wait blocks as Wait does after
// its reservation; its error is a reservation that failed (the caller may
// then Wait). every <= 0 paces nothing: wait returns at once.
func (p Pacer) Queue(ctx context.Context, pipe redis.Pipeliner, channel, workspace, chat string, every time.Duration, burst int) (wait func(context.Context) error) {
	if every <= 0 {
		return func(context.Context) error { return nil }
	}
	keys := p.Keys(channel, workspace, chat)
	result := pipescript.Queue(ctx, pipe, p.Client, reserveScript, keys, max(every.Microseconds(), 1), max(burst, 1))
	return func(ctx context.Context) error {
		wait, err := result(ctx).Int64()
		if err != nil {
			return fmt.Errorf("pace: %w", err)
		}
		return p.sleep(ctx, keys, wait)
	}
}

// sleep waits the wait (µs) a reservation returned, and then for a hold
// set meanwhile.
func (p Pacer) sleep(ctx context.Context, keys []string, wait int64) error {
	if wait <= 0 {
		return nil
	}
	if !retry.Sleep(ctx, time.Duration(wait)*time.Microsecond) {
		return ctx.Err()
	}
	// A 429 may have held the chat while this post waited for its slot.
	hold, err := p.Client.PTTL(ctx, keys[1]).Result()
	if err != nil || hold <= 0 {
		return nil
	}
	if !retry.Sleep(ctx, hold) {
		return ctx.Err()
	}
	return nil
}

// Hold makes every replica wait after before posting to the chat again:
// the platform asked so (Retry-After).
func (p Pacer) Hold(ctx context.Context, channel, workspace, chat string, after time.Duration) error {
	if after <= 0 {
		return nil
	}
	if err := holdScript.Run(ctx, p.Client, p.Keys(channel, workspace, chat)[1:], max(after.Milliseconds(), 1)).Err(); err != nil {
		return fmt.Errorf("hold chat: %w", err)
	}
	return nil
}
