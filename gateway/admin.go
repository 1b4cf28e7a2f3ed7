package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Compaction outcomes of CompactConversation.
const (
	CompactDone    = compactDone
	CompactNothing = compactNothing
)

// ResetConversation forgets conv's history, as /reset does in the chat,
// under the conversation lock so that it is ordered with the turns. While
// a turn runs (on any replica) it fails with sessions.ErrLocked: an
// operator's change waits for a quiet moment instead of changing a history
// under a running turn.
func (g *Gateway) ResetConversation(ctx context.Context, conv string) error {
	lock, err := g.store.TryLock(ctx, conv)
	if err != nil {
		return fmt.Errorf("lock the conversation: %w", err)
	}
	defer lock.Release(context.WithoutCancel(ctx))
	if err := g.store.Clear(ctx, conv); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	return nil
}

// CompactConversation summarises conv's older rounds, as /compact does in
// the chat, and returns CompactDone or CompactNothing. It fails with
// sessions.ErrLocked while a turn runs.
func (g *Gateway) CompactConversation(ctx context.Context, conv string) (string, error) {
	lock, err := g.store.TryLock(ctx, conv)
	if err != nil {
		return "", fmt.Errorf("lock the conversation: %w", err)
	}
	defer lock.Release(context.WithoutCancel(ctx))
	history, err := g.store.History(ctx, conv)
	if err != nil {
		return "", fmt.Errorf("compact: %w", err)
	}
	channel, _, _ := strings.Cut(conv, ":")
	_, outcome := g.compactor.compact(ctx, lock, channel, history)
	if outcome == compactFailed {
		return "", errors.New("compact: the model could not summarise it (the log says why)")
	}
	return outcome, nil
}
