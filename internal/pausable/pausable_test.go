package pausable_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/pausable"
)

var errOver = errors.New("over")

// TestPausedTimeDoesNotCount: a timeout paused for longer than itself
// does not end; resumed, it ends with its cause after what was left, and
// Pause reaches every pausable timeout of the chain.
func TestPausedTimeDoesNotCount(t *testing.T) {
	t.Parallel()
	outer, cancelOuter := pausable.WithTimeout(context.Background(), 1500*time.Millisecond, errOver)
	defer cancelOuter()
	inner, cancelInner := pausable.WithTimeout(outer, time.Second, errOver)
	defer cancelInner()
	resume := pausable.Pause(inner)
	select {
	case <-inner.Done():
		t.Fatal("a paused timeout ended")
	case <-outer.Done():
		t.Fatal("the timeout around a paused one ended")
	case <-time.After(2 * time.Second):
	}
	resume()
	resume() // once is enough
	select {
	case <-inner.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a resumed timeout never ended")
	}
	if !errors.Is(context.Cause(inner), errOver) {
		t.Fatalf("cause = %v", context.Cause(inner))
	}
}

// TestATimeoutRunOutWhilePausingEndsOnResume: a pause that comes as the
// timeout runs out leaves it ending as soon as resumed, never a whole
// timeout later.
func TestATimeoutRunOutWhilePausingEndsOnResume(t *testing.T) {
	t.Parallel()
	ctx, cancel := pausable.WithTimeout(context.Background(), time.Millisecond, errOver)
	defer cancel()
	time.Sleep(20 * time.Millisecond)
	resume := pausable.Pause(ctx)
	resume()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("never ended")
	}
	plain, cancelPlain := context.WithCancel(context.Background())
	defer cancelPlain()
	pausable.Pause(plain)() // under no pausable timeout: nothing to pause
}
