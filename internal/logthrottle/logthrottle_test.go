package logthrottle

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a hand-moved clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestOneLinePerReasonAndSourcePerInterval(t *testing.T) {
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	th := New(10*time.Second, c.Now)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	ctx := context.Background()
	for range 1000 {
		th.Log(ctx, log, slog.LevelWarn, "bad_signature", "slack", "request refused", "reason", "bad_signature")
	}
	th.Log(ctx, log, slog.LevelWarn, "stale_timestamp", "slack", "request refused", "reason", "stale_timestamp")
	th.Log(ctx, log, slog.LevelWarn, "bad_signature", "feishu", "callback refused", "reason", "bad_signature")
	if n := strings.Count(buf.String(), "\n"); n != 3 {
		t.Fatalf("%d lines; want one per (reason, source):\n%s", n, buf.String())
	}
	c.advance(9 * time.Second)
	th.Log(ctx, log, slog.LevelWarn, "bad_signature", "slack", "request refused")
	c.advance(time.Second)
	buf.Reset()
	th.Log(ctx, log, slog.LevelWarn, "bad_signature", "slack", "request refused")
	if got := buf.String(); !strings.Contains(got, "suppressed=1000") {
		t.Fatalf("the line after the interval = %q; want the 1000 held back since", got)
	}
	buf.Reset()
	c.advance(10 * time.Second)
	th.Log(ctx, log, slog.LevelWarn, "bad_signature", "slack", "request refused")
	if got := buf.String(); strings.Contains(got, "suppressed") || got == "" {
		t.Fatalf("a quiet interval: %q; want a plain line", got)
	}
}

func TestPairsBeyondTheBoundShareOneEntry(t *testing.T) {
	th := New(time.Hour, nil)
	for i := range maxKeys + 500 {
		th.Allow("r", strings.Repeat("x", i))
	}
	if n := len(th.seen); n > maxKeys+1 {
		t.Fatalf("%d entries; want at most %d", n, maxKeys+1)
	}
	if ok, _ := th.Allow("new", "pair"); ok {
		t.Fatal("a pair past the bound got a line of its own")
	}
}

func TestNilAndDisabledLevels(t *testing.T) {
	var th *Throttle
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	th.Log(context.Background(), log, slog.LevelWarn, "r", "s", "one")
	th.Log(context.Background(), log, slog.LevelWarn, "r", "s", "two")
	if n := strings.Count(buf.String(), "\n"); n != 2 {
		t.Fatalf("a nil Throttle held lines back: %q", buf.String())
	}
	// A level the logger drops spends nothing: the Warn after it passes.
	th = New(time.Hour, nil)
	buf.Reset()
	th.Log(context.Background(), log, slog.LevelInfo, "r", "s", "dropped")
	th.Log(context.Background(), log, slog.LevelWarn, "r", "s", "kept")
	if got := buf.String(); !strings.Contains(got, "kept") || strings.Contains(got, "suppressed") {
		t.Fatalf("got %q", got)
	}
}

func TestConcurrentUse(t *testing.T) {
	th := New(time.Hour, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for range 8 {
		wg.Go(func() {
			for range 500 {
				if ok, _ := th.Allow("r", "s"); ok {
					mu.Lock()
					passed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if passed != 1 {
		t.Fatalf("%d lines passed; want 1", passed)
	}
}
