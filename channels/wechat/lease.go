package wechat

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

// A lease makes one replica the only one that polls an iLink bot or holds a
// WeCom bot's long connection. It is a Redis key set with SET NX PX to a
// random token; the holder renews it every third of its TTL with a script
// that extends it only while it still holds that token, and releases it
// with a script that deletes it only while it holds it. A holder that dies
// stops renewing: the key expires after at most one TTL and the next try of
// another replica (every third of the TTL) takes it over.

var leaseRenewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`)

var leaseReleaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// errLeaseLost ends a holder's work when a renewal finds the lease gone.
var errLeaseLost = errors.New("wechat: lease lost to another replica")

// lease is one lease key on one client.
type lease struct {
	client redis.UniversalClient
	key    string
	ttl    time.Duration
	log    *slog.Logger
	// elsewhere, when set, hears after each try whether another replica
	// holds the lease (true) or this one took it (false).
	elsewhere func(bool)
}

func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// hold runs work whenever this replica holds the lease, until ctx ends.
// work gets a context that is cancelled when the lease is lost; when work
// returns the lease is released (and taken again on the next try if work
// returned early, e.g. after a dropped connection). hold returns when ctx
// ends, after work has returned.
func (l *lease) hold(ctx context.Context, work func(ctx context.Context)) {
	every := l.ttl / 3
	for ctx.Err() == nil {
		token := randomToken()
		ok, err := l.client.SetNX(ctx, l.key, token, l.ttl).Result()
		if err != nil && ctx.Err() == nil {
			l.log.Warn("lease: redis error; retrying", "key", l.key, "err", err)
		}
		if err == nil && l.elsewhere != nil {
			l.elsewhere(!ok)
		}
		if err != nil || !ok {
			if !retry.Sleep(ctx, retry.Jitter(every)) {
				return
			}
			continue
		}
		l.log.Debug("lease taken", "key", l.key)
		l.run(ctx, token, work)
		l.release(token)
		// Give another replica a fair chance after an early return, and
		// do not spin when work fails at once.
		if !retry.Sleep(ctx, retry.Jitter(every)) {
			return
		}
	}
}

// run calls work under the lease, renewing it until work returns.
func (l *lease) run(ctx context.Context, token string, work func(ctx context.Context)) {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		work(wctx)
	}()
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	lastRenew := time.Now()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			rctx, rcancel := context.WithTimeout(ctx, l.ttl/3)
			n, err := leaseRenewScript.Run(rctx, l.client, []string{l.key}, token, l.ttl.Milliseconds()).Int()
			rcancel()
			switch {
			case err == nil && n == 1:
				lastRenew = time.Now()
			case err == nil:
				l.log.Warn("lease lost: another replica holds it now", "key", l.key)
				cancel(errLeaseLost)
				<-done
				return
			case time.Since(lastRenew) >= l.ttl:
				// Unrenewed for a whole TTL: another replica may have it.
				l.log.Warn("lease could not be renewed in time; stepping back", "key", l.key, "err", err)
				cancel(errLeaseLost)
				<-done
				return
			}
		}
	}
}

func (l *lease) release(token string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := leaseReleaseScript.Run(ctx, l.client, []string{l.key}, token).Err(); err != nil {
		l.log.Warn("release lease", "key", l.key, "err", err)
	}
}

func leaseKey(prefix, kind, bot string) string {
	return fmt.Sprintf("%swechat:lease:{%s:%s}", prefix, kind, bot)
}
