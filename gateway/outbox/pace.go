package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/internal/chatpace"
)

// pacer spaces the posts to one chat over every replica, to the rate its
// platform publishes (channels.Pace), with the budget in Redis that every
// replica and adapter shares (package chatpace).
type pacer struct {
	client redis.UniversalClient
	prefix string
}

func (p *pacer) shared() chatpace.Pacer { return chatpace.Pacer{Client: p.client, Prefix: p.prefix} }

// wait blocks until m's chat may be posted to at pace. A Redis failure is
// returned; the caller posts unpaced rather than not at all.
func (p *pacer) wait(ctx context.Context, m channels.Message, pace channels.Pace) error {
	if err := p.shared().Wait(ctx, m.Channel, m.Workspace, m.Chat, pace.Every, pace.Burst); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// hold makes every replica wait after before posting to m's chat again:
// the platform asked so (Retry-After).
func (p *pacer) hold(ctx context.Context, m channels.Message, after time.Duration) error {
	if err := p.shared().Hold(ctx, m.Channel, m.Workspace, m.Chat, after); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}
