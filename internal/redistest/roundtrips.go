package redistest

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// RoundTrips is a go-redis hook that counts what a client sends to Redis:
// a command, a pipeline or a MULTI/EXEC counts once, as each is one round
// trip. Benchmarks report it per operation.
type RoundTrips struct{ n atomic.Int64 }

// CountRoundTrips adds a RoundTrips hook to client.
func CountRoundTrips(client redis.UniversalClient) *RoundTrips {
	rt := &RoundTrips{}
	client.AddHook(rt)
	return rt
}

// Load is the count so far; Reset starts it over.
func (c *RoundTrips) Load() int64 { return c.n.Load() }

// Reset sets the count to zero.
func (c *RoundTrips) Reset() { c.n.Store(0) }

// DialHook implements redis.Hook.
func (c *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (c *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (c *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}
