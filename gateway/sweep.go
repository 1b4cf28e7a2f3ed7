package gateway

import (
	"context"
	"time"

	"github.com/parleyhq/parley/retry"
)

// sweep schedules conversations that have queued messages and no lock
// holder: every SweepEvery, and as soon as Redis answers again after a
// failure. A replica that dies after accepting a message leaves it queued;
// without the sweep it would wait for the conversation's next message.
func (g *Gateway) sweep() {
	t := time.NewTicker(g.cfg.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
			g.sweepOnce("periodic")
		case <-g.redisDown:
			if g.waitForRedis() {
				g.sweepOnce("redis answers again")
			}
		}
	}
}

// redisFailed tells the sweep that a Redis call failed, so that it sweeps
// once Redis answers again.
func (g *Gateway) redisFailed() {
	select {
	case g.redisDown <- struct{}{}:
	default:
	}
}

// waitForRedis pings until Redis answers (true) or Shutdown begins, on
// the retry loop of the gateway's Redis calls, which says once that Redis
// is away (not at every ping). A return after failed pings counts as a
// reconnect of redis.
func (g *Gateway) waitForRedis() bool {
	ctx, cancel := context.WithCancel(g.runCtx)
	defer cancel()
	go func() { // Shutdown ends the wait as the end of runCtx does
		select {
		case <-g.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	away := false
	err := retry.RetryUntil(ctx, g.redisRetry, "ping", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		err := g.store.Ping(ctx)
		away = away || err != nil
		return err
	})
	if err != nil {
		return false
	}
	if away {
		g.metrics.Reconnects.WithLabelValues("redis").Inc()
		g.log.Info("redis answers again; sweeping for queued messages")
	}
	return true
}

// sweepOnce schedules the conversations with queued messages and no lock
// holder that this replica is not already serving or about to retry. They
// are not necessarily another replica's: a message accepted a moment ago
// is queued and unheld until a worker claims it.
func (g *Gateway) sweepOnce(why string) {
	orphans, err := g.store.Orphans(g.runCtx)
	if err != nil {
		g.log.Warn("sweep for unserved conversations", "why", why, "err", err)
	}
	n := 0
	for _, conv := range orphans {
		if g.sched.known(conv) {
			continue
		}
		n++
		g.sched.schedule(conv)
	}
	if n > 0 {
		g.log.Info("sweep found conversations with queued messages and no lock holder; serving them", "why", why, "conversations", n)
	}
}
