package channels

import (
	"context"
	"time"
)

// Sleep waits d or until ctx ends, and reports whether the full wait
// passed. Adapters use it between reconnects and retries so that shutdown
// never waits out a backoff.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
