package officialaccount

import (
	"fmt"
	"testing"

	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
)

// BenchmarkPassiveReply is one safe-mode callback answered passively by a
// turn on the other replica: verify and decrypt, claim, submit, wait,
// hand over through Redis, settle, encrypt the reply. The stand-in
// gateway's own de-dup is one of the round trips counted.
func BenchmarkPassiveReply(b *testing.B) {
	c := newCluster(b, testAESKey)
	rt := redistest.CountRoundTrips(c.r.Client)
	c.replica(b, "b", nil) // runs the turns
	a := c.replica(b, "a", nil)
	gw, platform := c.gw, c.platform
	const batch = 256 // callbacks prepared (encrypted) off the clock at a time
	var reqs []wechattest.Request
	b.ReportAllocs()
	rt.Reset()
	n := 0
	for b.Loop() {
		if len(reqs) == 0 {
			b.StopTimer()
			for i := range batch {
				reqs = append(reqs, platform.Encrypted(b, inbound("o-bench", "how are you?", fmt.Sprint(n*batch+i)), true))
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
	b.ReportMetric(float64(rt.Load())/float64(b.N), "redis-rt/callback")
}
