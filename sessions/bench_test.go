package sessions_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/sessions"
)

// usedMemory reads used_memory from INFO memory.
func usedMemory(b *testing.B, r *redistest.Redis) int64 {
	b.Helper()
	info, err := r.Client.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Skip("this Redis reports no used_memory (the embedded fallback): run against a real one")
	return 0
}

// BenchmarkRedisMemoryPerConversation measures what one conversation costs
// Redis: ten turns of a user question (~200 bytes) and an answer (~600
// bytes), the size of a typical chat thread. It reports bytes per
// conversation; the figure for a thousand conversations is in
// docs/operations.md.
func BenchmarkRedisMemoryPerConversation(b *testing.B) {
	r := redistest.New(b)
	// A short lock TTL lets the receipts of Complete expire before the
	// second reading: they live one lock TTL and are not part of what a
	// conversation keeps.
	s := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, HistoryTTL: time.Hour, LockTTL: 100 * time.Millisecond})
	ctx := context.Background()
	question := strings.Repeat("How do I roll back the last deploy of the payments service? ", 4)[:200]
	answer := strings.Repeat("Run the rollback job from the deploy dashboard, then watch the error rate. ", 9)[:600]
	const conversations = 1000
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// Only this benchmark's own keys are added between the two readings;
		// the server is never flushed (REDIS_URL may be shared).
		before := usedMemory(b, r)
		b.StartTimer()
		for c := 0; c < conversations; c++ {
			conv := fmt.Sprintf("slack:T0001:C0001:17000000%02d.%06d", i, c)
			for turn := 0; turn < 10; turn++ {
				l, err := s.TryLock(ctx, conv)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Complete(ctx, l, nil, []sessions.Message{{Role: "user", Content: question}, {Role: "assistant", Content: answer}}); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		waitReceiptsExpired(b, r)
		after := usedMemory(b, r)
		b.ReportMetric(float64(after-before)/conversations, "redis-bytes/conv")
		b.StartTimer()
	}
}

// waitReceiptsExpired waits until no receipt of Complete is left under the
// benchmark's prefix (SCAN expires the keys it visits).
func waitReceiptsExpired(b *testing.B, r *redistest.Redis) {
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		keys, _, err := r.Client.Scan(ctx, 0, r.Prefix+"conv:{*}:done:*", 100000).Result()
		if err != nil {
			b.Fatal(err)
		}
		if len(keys) == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d receipts still there after 30 s", len(keys))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
