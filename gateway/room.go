package gateway

import (
	"context"

	"github.com/parleyhq/parley/channels"
	roomctx "github.com/parleyhq/parley/gateway/context"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
)

// The room of a turn (what other people wrote where the bot was asked) is
// read by gateway/context under the turn's lock; what the turn changes of
// it (the cursor, the ambient messages taken) rides with the turn's
// completion, so that it lands only with the turn.

// newRooms is the room reader of a store that keeps rooms; nil otherwise.
func newRooms(store sessions.Store, m *metrics.Metrics, g *Gateway) *roomctx.Reader {
	if _, ok := store.(sessions.Rooms); !ok {
		return nil
	}
	return &roomctx.Reader{Metrics: m, Log: g.log, Throttle: g.refusals}
}

// readRoom is the room of m's turn, under c's lock; the zero Turn when the
// store keeps no rooms.
func (g *Gateway) readRoom(ctx context.Context, c *sessions.Claim, m channels.Message, eff *policy.Effective) roomctx.Turn {
	if g.room == nil {
		return roomctx.Turn{}
	}
	return g.room.Read(ctx, roomctx.Ask{
		Message: m, Policy: eff.Context(), State: c.Room,
		Admitted: eff.Access(m.User, m.Chat, m.DM).Allowed, Reader: g.capsOf(m).RoomReader,
	})
}

// keepAmbient answers an ambient message (one the bot received but was not
// addressed in) with nothing: the turn's completion keeps it in its
// conversation's ambient buffer for the next addressed turn, if the
// access rules admit its sender and the scope reads any room at all.
func (g *Gateway) keepAmbient(m channels.Message, eff *policy.Effective) result {
	c := eff.Context()
	if g.room == nil || !admits(eff, m) || c.MaxMessages <= 0 || c.MaxBytes <= 0 {
		return result{}
	}
	entry, ok := roomctx.Ambient(m, c.MaxBytes)
	if !ok {
		return result{}
	}
	return result{room: sessions.RoomWrite{Ambient: entry}}
}

// writeRoomWithTurn gives the turn's room write w to its lock, for the
// completion to apply with the turn (zero: nothing to write).
func (g *Gateway) writeRoomWithTurn(l *sessions.Lock, w sessions.RoomWrite) {
	if rs, ok := g.store.(sessions.Rooms); ok && !w.IsZero() {
		rs.WriteWithTurn(l, w)
	}
}

// writeRoomNow applies w at once, for a turn that paused for an approval:
// its record holds the room it read, so the next turn must not read it
// again. A failure means the next turn reads it again, never that it is
// lost.
func (g *Gateway) writeRoomNow(ctx context.Context, conv string, w sessions.RoomWrite) {
	rs, ok := g.store.(sessions.Rooms)
	if !ok || w.IsZero() {
		return
	}
	if err := rs.WriteRoom(context.WithoutCancel(ctx), conv, w); err != nil {
		g.log.WarnContext(ctx, "could not record the room a paused turn read; the next turn reads it again", "err", err)
	}
}

// decideUnlessAmbient decides an approval typed or clicked on arrival
// (commands.Decider), but never in an ambient message: a message that does
// not address the bot is no command to it.
func (g *Gateway) decideUnlessAmbient(ctx context.Context, m channels.Message) (bool, error) {
	if m.Ambient {
		return false, nil
	}
	return g.decider.Decide(ctx, m)
}
