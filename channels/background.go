package channels

import (
	"context"
	"sync"
)

// Background is the work an adapter starts that outlives the request or
// call that started it — a note sent after a webhook was acked, a typing
// indicator — and must end with the adapter's Run: Stop cancels its
// context and waits for it. The zero value is ready to use.
type Background struct {
	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped bool
}

// Go runs fn on a goroutine with the background context and reports true;
// after Stop it runs nothing and reports false.
func (b *Background) Go(fn func(ctx context.Context)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return false
	}
	if b.ctx == nil {
		b.ctx, b.cancel = context.WithCancel(context.Background())
	}
	b.wg.Go(func() { fn(b.ctx) })
	return true
}

// Stop cancels the running work and waits until it has returned. It is
// idempotent; Go runs nothing afterwards.
func (b *Background) Stop() {
	b.mu.Lock()
	b.stopped = true
	if b.cancel != nil {
		b.cancel()
	}
	b.mu.Unlock()
	b.wg.Wait()
}
