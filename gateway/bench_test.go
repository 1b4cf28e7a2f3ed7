package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
	"github.com/redis/go-redis/v9"
)

// roundTrips counts what the client sends to Redis: a pipeline or a
// MULTI/EXEC counts once, as it is one round trip.
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

// BenchmarkTurn measures one whole turn — submit, de-dup, queue, lock,
// history read, model call against the in-process fake, atomic commit,
// reply — on a real Redis, reporting Redis round trips per turn.
func BenchmarkTurn(b *testing.B) {
	r := redistest.New(b)
	rt := &roundTrips{}
	r.Client.AddHook(rt)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, MaxMessages: 40})
	model := openaitest.New(b)
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := agent.New(agent.Config{Model: "bench", Timeout: 10 * time.Second}, agent.NewClient(model.URL(), "sk", nil), agent.NewRegistry(), m, log)
	gw := gateway.New(gateway.Config{Workers: 4}, store, a, m, log)
	ch := newRecorder("slack")
	gw.Register(ch)
	gw.Start()
	b.Cleanup(func() { gw.Shutdown(context.Background()) })
	ctx := context.Background()

	b.ReportAllocs()
	b.ResetTimer()
	rt.n.Store(0)
	for i := 0; i < b.N; i++ {
		if err := gw.Submit(ctx, msg("bench", fmt.Sprintf("ev-%d", i), "how are you?")); err != nil {
			b.Fatal(err)
		}
		waitReplies(b, ch, i+1)
	}
	b.StopTimer()
	b.ReportMetric(float64(rt.n.Load())/float64(b.N), "redis-rt/turn")
}

func waitReplies(b *testing.B, ch *recorder, n int) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for len(ch.got) < n {
		ch.cond.Wait()
	}
}
