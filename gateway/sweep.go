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

// waitForRedis pings until Redis answers (true) or Shutdown begins. It
// says once that Redis is away, and when it is back.
func (g *Gateway) waitForRedis() bool {
	b := retry.Backoff{Min: g.cfg.RetryMin, Max: g.cfg.RetryMax}
	for away := false; ; {
		ctx, cancel := context.WithTimeout(g.runCtx, time.Second)
		err := g.store.Ping(ctx)
		cancel()
		if err == nil {
			if away {
				g.log.Info("redis answers again; sweeping for queued messages")
			}
			return true
		}
		if !away {
			g.log.Warn("redis does not answer; conversations are retried until it does", "err", err)
			away = true
		}
		select {
		case <-g.stop:
			return false
		case <-time.After(b.Next()):
		}
	}
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
