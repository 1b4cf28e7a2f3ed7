package channels

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/internal/redistest"
)

// redisCommands counts the commands sent to Redis, a pipeline's each.
type redisCommands struct{ n atomic.Int64 }

func (c *redisCommands) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *redisCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *redisCommands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// authors is a room written by ids, named by no one yet.
func authors(ids ...string) []RoomMessage {
	msgs := make([]RoomMessage, len(ids))
	for i, id := range ids {
		msgs[i] = RoomMessage{ID: fmt.Sprint(i), Author: id}
	}
	return msgs
}

func namesOf(msgs []RoomMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.AuthorName
	}
	return out
}

// TestNamesAreKeptInMemoryInFrontOfRedis: the names a replica read from
// Redis or looked up are named again from memory, with no Redis command,
// until NameMemoryTTL has passed; then Redis is read again, and a name
// another replica changed there shows.
func TestNamesAreKeptInMemoryInFrontOfRedis(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := time.Now()
	var lookups atomic.Int64
	lookup := func(_ context.Context, id string) (string, error) {
		lookups.Add(1)
		return "name of " + id, nil
	}
	// Another replica named U1 into Redis; this one reads it there and
	// looks U2 up.
	NewNameCache(r.Client, r.Prefix+"names:").Name(ctx, "T1", authors("U1"), now, lookup, log)
	c := NewNameCache(r.Client, r.Prefix+"names:")
	cmds := &redisCommands{}
	r.Client.AddHook(cmds)
	first := authors("U1", "U2")
	c.Name(ctx, "T1", first, now, lookup, log)
	if got := namesOf(first); got[0] != "name of U1" || got[1] != "name of U2" || lookups.Load() != 2 {
		t.Fatalf("names %q after %d lookups; want both named, U2 looked up", got, lookups.Load())
	}
	before := cmds.n.Load()
	for _, at := range []time.Duration{time.Second, NameMemoryTTL - time.Second} {
		again := authors("U2", "U1", "U2")
		c.Name(ctx, "T1", again, now.Add(at), lookup, log)
		if got := namesOf(again); got[0] != "name of U2" || got[1] != "name of U1" {
			t.Errorf("names %q at +%s; want both from memory", got, at)
		}
	}
	if n := cmds.n.Load() - before; n != 0 || lookups.Load() != 2 {
		t.Errorf("%d Redis commands and %d lookups more naming the same people again; want none", n, lookups.Load()-2)
	}
	if err := r.Client.Set(ctx, r.Prefix+"names:T1:U1", "Ana (renamed)", NameTTL).Err(); err != nil {
		t.Fatal(err)
	}
	later := authors("U1")
	c.Name(ctx, "T1", later, now.Add(NameMemoryTTL), lookup, log)
	if got := namesOf(later); got[0] != "Ana (renamed)" || cmds.n.Load() == before {
		t.Errorf("name %q past NameMemoryTTL; want Redis read again and the new name", got[0])
	}
}

// TestNamesInMemoryAreBounded: a replica that names more people than
// maxNamesInMemory keeps no more than that, and still names each.
func TestNamesInMemoryAreBounded(t *testing.T) {
	t.Parallel()
	c := NewNameCache(nil, "names:")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := time.Now()
	lookup := func(_ context.Context, id string) (string, error) { return "name of " + id, nil }
	for i := range maxNamesInMemory/NameLookups + 10 {
		ids := make([]string, NameLookups)
		for j := range ids {
			ids[j] = fmt.Sprintf("U%d-%d", i, j)
		}
		msgs := authors(ids...)
		c.Name(context.Background(), "T1", msgs, now, lookup, log)
		if msgs[NameLookups-1].AuthorName != "name of "+ids[NameLookups-1] {
			t.Fatalf("read %d: %q unnamed", i, ids[NameLookups-1])
		}
		c.mu.Lock()
		n := len(c.mem)
		c.mu.Unlock()
		if n > maxNamesInMemory {
			t.Fatalf("%d names in memory; want at most %d", n, maxNamesInMemory)
		}
	}
}
