package channels

import (
	"context"
	"testing"
)

func TestBackground(t *testing.T) {
	var b Background
	started := make(chan struct{})
	ended := make(chan struct{})
	if !b.Go(func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		close(ended)
	}) {
		t.Fatal("Go refused before Stop")
	}
	<-started
	b.Stop()
	select {
	case <-ended:
	default:
		t.Fatal("Stop returned before the work ended")
	}
	if b.Go(func(context.Context) { t.Error("ran after Stop") }) {
		t.Fatal("Go accepted work after Stop")
	}
	b.Stop() // idempotent
	var idle Background
	idle.Stop() // nothing ever started
}
