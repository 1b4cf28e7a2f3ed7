// Package wxapi is what the Official Account and WeCom app adapters share
// on the way out: one access token per account for every replica, kept in
// Redis, and the JSON calls that use it, on Parley's retry loop, with the
// platforms' errcodes counted under a closed set of labels.
package wxapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/retry"
)

// An access token lives two hours, and fetching a new one makes the
// previous one expire a few minutes later. Each replica fetching its own
// would invalidate the others' tokens and spend the fetch quota, so the
// token lives in Redis: a replica that finds none takes a lock (SET NX PX
// with a random owner), looks again, fetches, stores the token with a TTL
// a margin short of its expiry, and releases the lock only while it still
// owns it. The others poll for the stored token meanwhile. A token the
// platform rejects is dropped with a compare-and-delete — at most once per
// ForceInterval across replicas, because the platforms rate-limit fetches.

// ErrForceLimited is returned when a rejected token cannot be replaced yet:
// another forced refresh happened less than ForceInterval ago.
var ErrForceLimited = errors.New("wxapi: the access token was refreshed moments ago; not forcing another refresh yet")

// ErrRefreshFailed wraps the error of the last failed refresh while
// replicas wait FailBackoff before fetching again.
var ErrRefreshFailed = errors.New("wxapi: fetching the access token failed")

// Fetch asks the platform for a new token and how long it lives.
type Fetch func(ctx context.Context) (token string, expiresIn time.Duration, err error)

// TokenOptions shape a Tokens; zero fields take the defaults.
type TokenOptions struct {
	// Margin is how long before the platform's expiry the token is
	// refreshed (default 5 minutes).
	Margin time.Duration
	// LockTTL bounds one refresh (default 15 s).
	LockTTL time.Duration
	// ForceInterval is the least time between two forced refreshes of a
	// rejected token, across replicas (default 1 minute).
	ForceInterval time.Duration
	// FailBackoff is how long a failed refresh is remembered, so that the
	// other replicas do not hammer the platform with the same refused
	// credentials (default 3 s).
	FailBackoff time.Duration
	// Poll is how often a replica waiting for another's refresh looks
	// again (default 50 ms).
	Poll time.Duration
}

// Defaults of TokenOptions.
const (
	DefaultMargin        = 5 * time.Minute
	DefaultLockTTL       = 15 * time.Second
	DefaultForceInterval = time.Minute
	DefaultFailBackoff   = 3 * time.Second
	DefaultPoll          = 50 * time.Millisecond
)

func (o TokenOptions) withDefaults() TokenOptions {
	if o.Margin <= 0 {
		o.Margin = DefaultMargin
	}
	if o.LockTTL <= 0 {
		o.LockTTL = DefaultLockTTL
	}
	if o.ForceInterval <= 0 {
		o.ForceInterval = DefaultForceInterval
	}
	if o.FailBackoff <= 0 {
		o.FailBackoff = DefaultFailBackoff
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	return o
}

// Tokens is one account's access token, shared by every replica.
type Tokens struct {
	client redis.UniversalClient
	// Keys of one account share a hash tag (one Redis Cluster slot).
	key, lockKey, forcedKey, failedKey string
	fetch                              Fetch
	opts                               TokenOptions
	log                                *slog.Logger
	// keep spaces Keep's tries after a failed refresh. Its failures are
	// counted in a registry of its own: the fetch counts its own.
	keep *retry.Retrier
	// Observe, when set before Keep runs, hears the outcome of each of
	// Keep's tries (nil: the account holds a token), e.g. to show the
	// account up or down.
	Observe func(err error)
}

// NewTokens returns the token of account (e.g. "wechat_oa:wx123" — never a
// secret), stored under prefix, fetched with fetch.
func NewTokens(client redis.UniversalClient, prefix, account string, fetch Fetch, opts TokenOptions, log *slog.Logger) *Tokens {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base := prefix + "wechat:token:{" + account + "}"
	return &Tokens{
		client: client, key: base, lockKey: base + ":lock", forcedKey: base + ":forced", failedKey: base + ":failed",
		fetch: fetch, opts: opts.withDefaults(), log: log,
		keep: retry.New("wechat_token", retry.Policy{MinWait: time.Second, MaxWait: time.Minute}, nil, log),
	}
}

var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// invalidateScript drops the token in KEYS[1] if it is still ARGV[1], unless
// a forced refresh happened within the last ARGV[2] ms (KEYS[2]). Returns 1
// when dropped, 2 when the token was already replaced or gone, 0 when the
// rate limit forbids dropping it.
var invalidateScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 2 end
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// Get returns the current token, fetching it when no replica has one. It
// waits while another replica fetches, until ctx ends.
func (t *Tokens) Get(ctx context.Context) (string, error) {
	for {
		tok, err := t.client.Get(ctx, t.key).Result()
		if err == nil && tok != "" {
			return tok, nil
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", fmt.Errorf("wxapi: read the access token: %w", err)
		}
		if failed, err := t.client.Get(ctx, t.failedKey).Result(); err == nil {
			return "", fmt.Errorf("%w: %s", ErrRefreshFailed, failed)
		}
		owner := randomOwner()
		ok, err := t.client.SetNX(ctx, t.lockKey, owner, t.opts.LockTTL).Result()
		if err != nil {
			return "", fmt.Errorf("wxapi: lock the access token: %w", err)
		}
		if ok {
			return t.refresh(ctx, owner)
		}
		if !retry.Sleep(ctx, retry.Jitter(t.opts.Poll)) {
			return "", fmt.Errorf("wxapi: waiting for another replica's access token: %w", context.Cause(ctx))
		}
	}
}

// refresh fetches and stores a token under the lock owned by owner.
func (t *Tokens) refresh(ctx context.Context, owner string) (string, error) {
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := releaseScript.Run(rctx, t.client, []string{t.lockKey}, owner).Err(); err != nil {
			t.log.Warn("release the access-token lock", "err", err)
		}
	}()
	// Another replica may have stored one between our look and our lock.
	if tok, err := t.client.Get(ctx, t.key).Result(); err == nil && tok != "" {
		return tok, nil
	}
	fctx, cancel := context.WithTimeout(ctx, t.opts.LockTTL)
	defer cancel()
	tok, expiresIn, err := t.fetch(fctx)
	if err != nil {
		if ctx.Err() == nil {
			if serr := t.client.Set(context.WithoutCancel(ctx), t.failedKey, err.Error(), t.opts.FailBackoff).Err(); serr != nil {
				t.log.Warn("remember a failed access-token refresh", "err", serr)
			}
		}
		return "", fmt.Errorf("%w: %w", ErrRefreshFailed, err)
	}
	if tok == "" {
		return "", fmt.Errorf("%w: the platform answered no token", ErrRefreshFailed)
	}
	if err := t.client.Set(ctx, t.key, tok, t.ttl(expiresIn)).Err(); err != nil {
		return "", fmt.Errorf("wxapi: store the access token: %w", err)
	}
	t.log.Debug("access token refreshed", "expires_in", expiresIn)
	return tok, nil
}

// ttl is how long a token that lives expiresIn is kept: a margin short of
// its expiry, and never less than half its life.
func (t *Tokens) ttl(expiresIn time.Duration) time.Duration {
	if expiresIn <= 0 {
		expiresIn = 2 * time.Hour
	}
	return max(expiresIn-t.opts.Margin, expiresIn/2, time.Second)
}

// Invalidate reports that the platform rejected bad (expired or revoked
// early). The next Get fetches a new token, unless another replica already
// did; within ForceInterval of the last forced refresh it returns
// ErrForceLimited instead, with how long until the next is allowed.
func (t *Tokens) Invalidate(ctx context.Context, bad string) (time.Duration, error) {
	n, err := invalidateScript.Run(ctx, t.client, []string{t.key, t.forcedKey}, bad, t.opts.ForceInterval.Milliseconds()).Int()
	if err != nil {
		return 0, fmt.Errorf("wxapi: invalidate the access token: %w", err)
	}
	if n != 0 {
		return 0, nil
	}
	wait, err := t.client.PTTL(ctx, t.forcedKey).Result()
	if err != nil || wait < 0 {
		wait = t.opts.ForceInterval
	}
	return wait, ErrForceLimited
}

// Keep refreshes the token whenever it runs out, until ctx ends, so that a
// reply rarely waits for a fetch; the lock makes one replica do it. A
// refresh that fails is tried again on the retry loop, which logs it when
// its failure changes, not at every try.
func (t *Tokens) Keep(ctx context.Context) {
	for ctx.Err() == nil {
		failed := false
		err := retry.RetryUntil(ctx, t.keep, "get the access token (replies fail until it works)", func(ctx context.Context) error {
			_, err := t.Get(ctx)
			failed = failed || err != nil
			if t.Observe != nil && ctx.Err() == nil {
				t.Observe(err)
			}
			return err
		})
		if err != nil {
			return
		}
		if failed {
			t.log.Info("access token available again")
		}
		left, err := t.client.PTTL(ctx, t.key).Result()
		if err != nil || left <= 0 {
			left = time.Second
		}
		retry.Sleep(ctx, left+retry.Jitter(t.opts.Poll))
	}
}

func randomOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
