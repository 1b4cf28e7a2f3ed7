package channels

import (
	"context"
	"sync"
	"time"
)

// TypingAfter shows t's typing indicator for m only once delay has passed:
// a turn that is answered sooner shows none (on Slack, no reaction added
// and removed: two Web API calls saved on each fast answer). A delay of 0
// or less shows it at once.
//
// The returned stop may be called any number of times, from any
// goroutine. Before the delay it cancels the indicator, which is then
// never shown; once the delay has passed it waits for the indicator to be
// shown (or to fail) and clears it, so nothing shown is left behind.
func TypingAfter(ctx context.Context, t Typing, m Message, delay time.Duration) (stop func()) {
	if delay <= 0 {
		clear := t.StartTyping(ctx, m)
		var once sync.Once
		return func() { once.Do(clear) }
	}
	var clear func()
	shown := make(chan struct{}) // closed once StartTyping has returned
	timer := time.AfterFunc(delay, func() {
		defer close(shown)
		if ctx.Err() == nil {
			clear = t.StartTyping(ctx, m)
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			// Stop reports false once the timer's func has started (it
			// runs in a goroutine of its own): wait for it, then clear.
			if timer.Stop() {
				return
			}
			<-shown
			if clear != nil {
				clear()
			}
		})
	}
}
