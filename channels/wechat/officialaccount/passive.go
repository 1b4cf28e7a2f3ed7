package officialaccount

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/retry"
)

// The passive reply of a message, across replicas.
//
// WeChat holds a callback open for 5 seconds; whatever the response
// carries is shown to the user (a passive reply), and after that only the
// customer-service API can reach them. The turn that answers a message
// runs on whichever replica holds its conversation — not necessarily the
// one holding the callback. So the callback's handler (the waiter) and the
// turn's Send meet in one Redis hash per message, and every decision is a
// Lua script on it, so that exactly one of them delivers the answer:
//
//	state   waiting → passive (Send handed the reply to the waiter in time)
//	        waiting → active  (the waiter's time ran out, or the reply is
//	                           too long: Send uses the customer-service API)
//	owner   the waiter's random token; a retried callback takes over
//	until   the current waiter's deadline (Redis time, ms)
//	reply   the handed reply; served  set once a waiter has served it
//
// A retry of the callback (WeChat gives up on a request after 5 s and
// sends it again, possibly to another replica) takes the waiter's place:
// WeChat listens to the newest request only. The old waiter is woken and
// answers empty; a reply already handed over goes to the new one. Only
// the owner serves, and only once (served), so the user reads the answer
// once — passively or actively, never both.
//
// Waiters block on a list of their own (BLPOP), pushed by the scripts that
// change what they wait for.

var claimScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local st = redis.call('HGET', KEYS[1], 'state')
if not st then
  redis.call('HSET', KEYS[1], 'state', 'waiting', 'owner', ARGV[1], 'until', now + tonumber(ARGV[2]))
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 'new'
end
if st == 'active' or redis.call('HEXISTS', KEYS[1], 'served') == 1 then return 'done' end
if (redis.call('HGET', KEYS[1], 'owner') or '') ~= ARGV[4] then return 'retry' end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'until', now + tonumber(ARGV[2]))
redis.call('RPUSH', KEYS[2], 'superseded')
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 'takeover'
`)

var handoffScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'state') ~= 'waiting' then return 'active' end
if (redis.call('HGET', KEYS[1], 'owner') or '') ~= ARGV[2] then return 'retry' end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local late = now >= tonumber(redis.call('HGET', KEYS[1], 'until'))
if ARGV[3] ~= '1' or late then
  redis.call('HSET', KEYS[1], 'state', 'active')
  redis.call('RPUSH', KEYS[2], 'active')
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  return 'active'
end
redis.call('HSET', KEYS[1], 'state', 'passive', 'reply', ARGV[1])
redis.call('RPUSH', KEYS[2], 'reply')
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 'passive'
`)

var settleScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return {'active'} end
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return {'superseded'} end
if st == 'passive' then
  if redis.call('HSETNX', KEYS[1], 'served', '1') == 1 then return {'serve', redis.call('HGET', KEYS[1], 'reply')} end
  return {'done'}
end
if st == 'waiting' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if ARGV[2] == '1' or now >= tonumber(redis.call('HGET', KEYS[1], 'until')) then
    redis.call('HSET', KEYS[1], 'state', 'active')
    return {'active'}
  end
  return {'wait'}
end
return {'active'}
`)

var abandonScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] and redis.call('HGET', KEYS[1], 'state') == 'waiting' then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// Outcomes of claim.
const (
	claimNew      = "new"      // the first delivery: this request waits
	claimTakeover = "takeover" // a retry: this request replaces the waiter
	claimDone     = "done"     // answered already (or going out actively)
)

// passive is the store of the passive-reply states of one account.
type passive struct {
	client  redis.UniversalClient
	prefix  string // ends with the account's hash tag opening
	wait    time.Duration
	ttl     time.Duration
	polling time.Duration
}

// key is the state of message id; the wake lists share its hash tag.
func (p *passive) key(id string) string { return p.prefix + id + "}" }

func (p *passive) wakeKey(id, owner string) string { return p.key(id) + ":wake:" + owner }

// claim makes owner the waiter for message id.
func (p *passive) claim(ctx context.Context, id, owner string) (string, error) {
	for range 8 {
		current, err := p.client.HGet(ctx, p.key(id), "owner").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", fmt.Errorf("wechat_oa: read the passive state: %w", err)
		}
		res, err := claimScript.Run(ctx, p.client, []string{p.key(id), p.wakeKey(id, current)},
			owner, p.wait.Milliseconds(), p.ttl.Milliseconds(), current).Text()
		if err != nil {
			return "", fmt.Errorf("wechat_oa: claim the passive reply: %w", err)
		}
		if res != "retry" {
			return res, nil
		}
	}
	return claimDone, nil // the waiter keeps changing: leave it to the newest
}

// handoff offers reply to the waiter of message id. It reports true when
// the waiter took it (it will be the passive reply); false means the
// answer must go through the customer-service API — there is no waiter,
// its time is up, or allow is false (the reply does not fit a passive
// reply), in which case the waiter is told to answer empty at once.
func (p *passive) handoff(ctx context.Context, id, reply string, allow bool) (bool, error) {
	allowArg := "0"
	if allow {
		allowArg = "1"
	}
	for range 8 {
		owner, err := p.client.HGet(ctx, p.key(id), "owner").Result()
		if errors.Is(err, redis.Nil) {
			return false, nil // no waiter (expired, or never a callback)
		}
		if err != nil {
			return false, fmt.Errorf("wechat_oa: read the passive state: %w", err)
		}
		res, err := handoffScript.Run(ctx, p.client, []string{p.key(id), p.wakeKey(id, owner)}, reply, owner, allowArg, p.ttl.Milliseconds()).Text()
		if err != nil {
			return p.handedAnyway(ctx, id, reply, err)
		}
		switch res {
		case "passive":
			return true, nil
		case "active":
			return false, nil
		}
	}
	return false, nil
}

// handedAnyway decides after a failed handoff: if the script did run (the
// answer to it was lost), the reply is the waiter's and must not also go
// out actively; if that cannot be told, the error stands and nothing is
// sent, rather than risking the answer twice.
func (p *passive) handedAnyway(ctx context.Context, id, reply string, cause error) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	got, err := p.client.HMGet(ctx, p.key(id), "state", "reply").Result()
	if err != nil {
		return false, fmt.Errorf("wechat_oa: hand the reply to the waiting callback: %w", cause)
	}
	if got[0] == "passive" && got[1] == reply {
		return true, nil
	}
	return false, nil
}

// awaited is what a waiter ends with.
type awaited struct {
	reply  string
	serve  bool // serve reply passively
	reason string
}

// await blocks until the reply is handed to owner, another request takes
// over, or deadline passes; then it settles the state. Wake-ups come by
// BLPOP in whole seconds (go-redis's unit for it); the last fraction of a
// second is polled.
func (p *passive) await(ctx context.Context, id, owner string, deadline time.Time) (awaited, error) {
	wake := p.wakeKey(id, owner)
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		p.client.Del(cctx, wake)
	}()
	for {
		left := time.Until(deadline)
		final := left <= 0
		if !final {
			if left >= time.Second {
				_, err := p.client.BLPop(ctx, time.Second, wake).Result()
				if err != nil && !errors.Is(err, redis.Nil) {
					return p.settleNow(ctx, id, owner, err)
				}
			} else if !retry.Sleep(ctx, min(left, p.polling)) {
				return p.settleNow(ctx, id, owner, ctx.Err())
			}
		}
		res, err := p.settle(ctx, id, owner, final)
		if err != nil {
			return awaited{}, err
		}
		if res.reason != "wait" {
			return res, nil
		}
	}
}

// settleNow ends a wait that was cut short (the request went away, Redis
// failed): it settles for good, so that Send does not hand a reply to a
// waiter that is gone.
func (p *passive) settleNow(ctx context.Context, id, owner string, cause error) (awaited, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	res, err := p.settle(sctx, id, owner, true)
	if err != nil {
		return awaited{}, fmt.Errorf("%w (after %w)", err, cause)
	}
	return res, nil
}

func (p *passive) settle(ctx context.Context, id, owner string, final bool) (awaited, error) {
	finalArg := "0"
	if final {
		finalArg = "1"
	}
	out, err := settleScript.Run(ctx, p.client, []string{p.key(id)}, owner, finalArg).StringSlice()
	if err != nil {
		return awaited{}, fmt.Errorf("wechat_oa: settle the passive reply: %w", err)
	}
	res := awaited{reason: out[0]}
	if out[0] == "serve" && len(out) > 1 {
		res.reply, res.serve = out[1], true
	}
	return res, nil
}

// abandon drops owner's claim on a message that could not be handed to
// the gateway, so that WeChat's retry starts afresh.
func (p *passive) abandon(ctx context.Context, id, owner string) error {
	return abandonScript.Run(ctx, p.client, []string{p.key(id)}, owner).Err()
}
