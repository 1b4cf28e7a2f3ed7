package gateway_test

import (
	"context"
	"encoding/json"
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
	"github.com/parleyhq/parley/tracing"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
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

// BenchmarkTurn measures one whole turn — submit (de-dup and queue), lock,
// history read, model call against a fake that answers without reading the
// request, atomic commit, reply — on a real Redis, with a history of 10 and
// of 200 messages (capped there, so it stays that long), reporting Redis
// round trips per turn. The fake model runs in this process but allocates
// the same for every request, so the allocations that grow with the
// history are Parley's (openaitest.Constant).
func BenchmarkTurn(b *testing.B) {
	for _, n := range []int{10, 200} {
		b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) { benchmarkTurn(b, n, tracing.Tracer{}) })
	}
}

// BenchmarkTurnTraced is BenchmarkTurn with every span recorded and
// exported (to an exporter that drops them): the cost of tracing on.
// BenchmarkTurn is the cost with it off, as it is without
// OTEL_EXPORTER_OTLP_ENDPOINT.
func BenchmarkTurnTraced(b *testing.B) {
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { provider.Shutdown(context.Background()) })
	b.Run("history=10", func(b *testing.B) { benchmarkTurn(b, 10, tracing.New(provider)) })
}

func benchmarkTurn(b *testing.B, n int, tracer tracing.Tracer) {
	r := redistest.New(b)
	rt := &roundTrips{}
	r.Client.AddHook(rt)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, MaxMessages: n})
	model := openaitest.Constant(b, "fine")
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := agent.New(agent.Config{Model: "bench", Timeout: 10 * time.Second, Tracer: tracer}, agent.NewClient(model.URL, "sk", nil), agent.NewRegistry(), m, log)
	gw := gateway.New(gateway.Config{Workers: 4, Tracer: tracer}, store, a, m, log)
	ch := newRecorder("slack")
	gw.Register(ch)
	gw.Start()
	b.Cleanup(func() { gw.Shutdown(context.Background()) })
	ctx := context.Background()

	// The history as a store of any version holds it: one JSON message per
	// list entry.
	conv := msg("bench", "", "").ConversationKey()
	entries := make([]any, 0, n)
	for i := range n {
		role, text := "user", fmt.Sprintf("question %d: how do I roll back the last deploy of the payments service?", i)
		if i%2 == 1 {
			role, text = "assistant", fmt.Sprintf("answer %d: run the rollback job from the deploy dashboard, then watch the error rate for ten minutes.", i)
		}
		e, _ := json.Marshal(map[string]string{"role": role, "content": text})
		entries = append(entries, e)
	}
	if err := r.Client.RPush(ctx, r.Prefix+"conv:{"+conv+"}:history", entries...).Err(); err != nil {
		b.Fatal(err)
	}

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
