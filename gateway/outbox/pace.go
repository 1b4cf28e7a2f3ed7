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

// waitSlot blocks until m's chat may be posted to: for slot, reserved
// ahead, or else for a slot it reserves now. A reserved slot that could
// not be read (its pipeline failed) is replaced by one reserved now.
func (o *Outbox) waitSlot(ctx context.Context, m channels.Message, poster channels.Poster, slot *Slot) error {
	if slot != nil {
		err := slot.wait(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
	return o.pace.wait(ctx, m, o.paceOf(m.Channel, poster))
}

// hold makes every replica wait after before posting to m's chat again:
// the platform asked so (Retry-After).
func (p *pacer) hold(ctx context.Context, m channels.Message, after time.Duration) error {
	if err := p.shared().Hold(ctx, m.Channel, m.Workspace, m.Chat, after); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// Slot is the place of a reply's first post in its chat's pace, reserved
// in the pipeline of the turn's completion (Outbox.Reserve), which costs
// that post a round trip of its own.
type Slot struct {
	wait func(context.Context) error
}

// Reserve queues in pipe the reservation of the next slot of m's chat for
// the first post of a reply through poster; pass the Slot to Deliver once
// pipe has run. A reply that is not posted leaves its slot unused, and
// the chat's next post waits for the one after it.
func (o *Outbox) Reserve(ctx context.Context, pipe redis.Pipeliner, poster channels.Poster, m channels.Message) *Slot {
	pace := o.paceOf(m.Channel, poster)
	return &Slot{wait: o.pace.shared().Queue(ctx, pipe, m.Channel, m.Workspace, m.Chat, pace.Every, pace.Burst)}
}
