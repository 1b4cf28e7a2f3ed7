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
	s := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, HistoryTTL: time.Hour})
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
			l, err := s.TryLock(ctx, conv)
			if err != nil {
				b.Fatal(err)
			}
			for turn := 0; turn < 10; turn++ {
				if _, err := s.CommitTurn(ctx, l, []sessions.Message{{Role: "user", Content: question}, {Role: "assistant", Content: answer}}, nil); err != nil {
					b.Fatal(err)
				}
			}
			l.Release(ctx)
		}
		b.StopTimer()
		after := usedMemory(b, r)
		b.ReportMetric(float64(after-before)/conversations, "redis-bytes/conv")
		b.StartTimer()
	}
}
