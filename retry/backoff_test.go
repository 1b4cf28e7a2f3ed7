package retry

import (
	"context"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	for range 50 { // the waits are random: try often
		b := Backoff{Min: 100 * time.Millisecond, Max: time.Second}
		for i, ceiling := range []time.Duration{100, 200, 400, 800, 1000, 1000, 1000} {
			ceiling *= time.Millisecond
			if d := b.Next(); d < ceiling/2 || d > ceiling {
				t.Fatalf("wait %d = %v, want within [%v, %v]", i, d, ceiling/2, ceiling)
			}
		}
		for range 1000 {
			if d := b.Next(); d > time.Second || d < 0 {
				t.Fatalf("wait %v overflowed the cap", d)
			}
		}
		b.Reset()
		if d := b.Next(); d > 100*time.Millisecond {
			t.Fatalf("after Reset the wait is %v", d)
		}
	}
	b := Backoff{Min: time.Second, Max: time.Millisecond} // Max below Min counts as Min
	if d := b.Next(); d < time.Second/2 || d > time.Second {
		t.Fatalf("wait %v", d)
	}
}

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("a short sleep did not complete")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Error("a cancelled sleep reported a full wait")
	}
	if Jitter(0) != 0 || Jitter(-time.Second) != 0 {
		t.Error("Jitter of nothing is not nothing")
	}
}
