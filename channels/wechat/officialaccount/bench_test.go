package officialaccount

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
)

// roundTrips counts what the client sends to Redis; a pipeline or a script
// is one round trip.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// BenchmarkPassiveReply is one safe-mode callback answered passively by a
// turn on the other replica: verify and decrypt, claim, submit, wait,
// hand over through Redis, settle, encrypt the reply. The stand-in
// gateway's own de-dup is one of the round trips counted.
func BenchmarkPassiveReply(b *testing.B) {
	r := redistest.New(b)
	rt := &roundTrips{}
	r.Client.AddHook(rt)
	fake := wechattest.NewOfficialAccount(b, testAppID, testSecret)
	gw := newGateway(r)
	a := startReplica(b, testConfig(fake, testAESKey), testOptions(r, "a"), gw)
	other := startReplica(b, testConfig(fake, testAESKey), testOptions(r, "b"), gw)
	gw.turnOn = func() *Adapter { return other.ch }
	platform := wechattest.NewPlatform(b, testToken, testAESKey, testAppID)
	reqs := make([]wechattest.Request, 0, 1024)
	b.ReportAllocs()
	rt.n.Store(0)
	n := 0
	for b.Loop() {
		if len(reqs) == 0 {
			b.StopTimer()
			for i := range cap(reqs) {
				reqs = append(reqs, platform.Encrypted(b, inbound("o-bench", "how are you?", fmt.Sprint(n*1024+i)), true))
			}
			n++
			b.StartTimer()
		}
		req := reqs[0]
		reqs = reqs[1:]
		if _, ok := platform.Reply(b, wechattest.Post(b, a.url(), req)); !ok {
			b.Fatal("no passive reply")
		}
	}
	b.StopTimer()
	gw.turns.Wait()
	b.ReportMetric(float64(rt.n.Load())/float64(b.N), "redis-rt/callback")
}
