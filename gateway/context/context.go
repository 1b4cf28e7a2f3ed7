// Package context adds the room to a turn: what other people wrote where
// the bot was asked (the thread of a Slack mention, a Feishu topic, the
// group's last messages, the ambient messages a platform without a
// history API delivered), read once per turn, only what is new since the
// conversation's last read, budgeted, and rendered as untrusted data for
// the user turn (never the system prompt, which stays byte-identical).
//
// The read runs under the conversation's lock: the cursor of the last
// read and the ambient buffer are the conversation's (sessions.Rooms),
// and the turn's completion moves the cursor and drops the ambient
// messages it took, only if it writes the turn. Two replicas serving one
// thread therefore give each message to one turn; a turn that is not
// written leaves the room for whoever answers the message next.
//
// A read that fails, times out, is rate limited or refused leaves the turn
// answering from what it has, with a log line and a count in
// parley_context_reads_total; it is never the turn's failure.
package context

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/internal/logthrottle"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
)

// DefaultReadTimeout bounds one read of the room: past it the turn
// answers without.
const DefaultReadTimeout = 10 * time.Second

// Reader reads the rooms of turns. Its zero value is not usable; fill
// Metrics and Log.
type Reader struct {
	// Metrics counts reads; Log says why one failed, through Throttle
	// (nil: every failure is logged): a workspace over its rate limit
	// fails every read until its Retry-After has passed.
	Metrics  *metrics.Metrics
	Log      *slog.Logger
	Throttle *logthrottle.Throttle
	// Timeout bounds one read (0: DefaultReadTimeout).
	Timeout time.Duration
}

// Turn is the room of one turn.
type Turn struct {
	// Text is the room as the user turn shows it, before the user's own
	// message: a line saying what it is, then the messages inside the
	// untrusted-data envelope. "" when there is nothing to show.
	Text string
	// Messages counts the messages shown; Omitted those left out (over
	// the budget, or over what the reader returned).
	Messages, Omitted int
	// Write is what the turn's completion changes of the room: the new
	// cursor and the ambient messages taken.
	Write sessions.RoomWrite
}

// Ask is what a turn asks of its room.
type Ask struct {
	// Message is the message being answered.
	Message channels.Message
	// Policy is the scope's context.* settings.
	Policy policy.Context
	// Admitted: the scope's access rules admit the sender (not only as an
	// admin). A chat whose rules refuse the user reads nothing.
	Admitted bool
	// Reader is the channel's RoomReader (nil: it cannot read back).
	Reader channels.RoomReader
	// State is what the conversation kept of its room, as the turn's
	// claim read it (sessions.Claim.Room).
	State sessions.RoomState
}

// Read reads the room a asks for. It never fails: a failure of the
// platform leaves the turn answering without the part that failed.
func (r *Reader) Read(ctx context.Context, a Ask) Turn {
	c := a.Policy
	if !a.Admitted || c.MaxMessages <= 0 || c.MaxBytes <= 0 {
		return Turn{}
	}
	q := query(a)
	st := a.State
	msgs := r.ambient(a.Message.Channel, st.Ambient)
	t := Turn{Write: sessions.RoomWrite{Taken: st.Taken}}
	if q != nil {
		q.Since = st.Cursor
		room := r.readRoom(ctx, a, *q)
		msgs = append(msgs, room.Messages...)
		t.Omitted += room.Omitted
		t.Write.Cursor = room.Cursor
	}
	shown, cut := Budget(Others(msgs, a.Message), c.MaxMessages, c.MaxBytes)
	t.Messages, t.Omitted = len(shown.Messages), t.Omitted+cut
	t.Text = Render(shown, t.Omitted)
	if t.Text != "" || q != nil {
		r.Metrics.ContextMessages.WithLabelValues(a.Message.Channel).Observe(float64(len(shown.Messages)))
		r.Metrics.ContextBytes.WithLabelValues(a.Message.Channel).Observe(float64(len(t.Text)))
	}
	return t
}

// query is the read a asks of its channel's reader, or nil for none: the
// thread (context.thread) and, before a top-level mention outside a
// direct chat, the chat's recent messages (context.recent).
func query(a Ask) *channels.RoomQuery {
	if a.Reader == nil {
		return nil
	}
	recent := a.Policy.Recent
	if a.Message.DM {
		// A direct chat's earlier messages are the history already; and
		// a direct message never reads another chat.
		recent = 0
	}
	if !a.Policy.Thread && recent <= 0 {
		return nil
	}
	return &channels.RoomQuery{Message: a.Message, Thread: a.Policy.Thread, Recent: max(recent, 0), Max: a.Policy.MaxMessages}
}

// readRoom calls the reader once, bounded by the timeout, and counts the
// outcome. What it returned is used even when it failed part way.
func (r *Reader) readRoom(ctx context.Context, a Ask, q channels.RoomQuery) channels.Room {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultReadTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	room, err := a.Reader.ReadRoom(rctx, q)
	outcome := Outcome(err)
	r.Metrics.ContextReads.WithLabelValues(a.Message.Channel, outcome).Inc()
	if err != nil {
		r.Throttle.Log(ctx, r.Log, slog.LevelWarn, "room "+outcome, a.Message.Channel, "could not read all of the room; answering with what was read",
			"channel", a.Message.Channel, "outcome", outcome, "read", len(room.Messages), "err", err)
	}
	return room
}

// Outcome is the outcome label of parley_context_reads_total for a
// read's error.
func Outcome(err error) string {
	switch {
	case err == nil:
		return metrics.OutcomeOK
	case errors.Is(err, channels.ErrRoomRateLimited):
		return metrics.OutcomeRateLimited
	case errors.Is(err, channels.ErrRoomDenied):
		return metrics.OutcomeDenied
	}
	return metrics.OutcomeError
}

// ambient decodes the ambient entries of a conversation; one that does not
// decode is dropped (and logged): it is data of a previous version.
func (r *Reader) ambient(channel string, entries [][]byte) []channels.RoomMessage {
	if len(entries) == 0 {
		return nil
	}
	out := make([]channels.RoomMessage, 0, len(entries))
	bad := 0
	for _, e := range entries {
		var m channels.RoomMessage
		if err := json.Unmarshal(e, &m); err != nil {
			bad++
			continue
		}
		out = append(out, m)
	}
	if bad > 0 {
		r.Log.Warn("dropped undecodable ambient messages", "channel", channel, "dropped", bad)
	}
	r.Metrics.ContextReads.WithLabelValues(channel, metrics.OutcomeOK).Inc()
	return out
}

// Ambient is the entry the conversation's ambient buffer keeps for m, a
// message the bot received but was not addressed in: its author, time,
// text (cut to maxBytes) and what its attachments are. ok is false for a
// message with nothing to keep.
func Ambient(m channels.Message, maxBytes int) (entry []byte, ok bool) {
	rm := channels.RoomMessage{ID: m.ID, Author: m.User, AuthorName: m.UserName, Time: m.Received, Text: cutText(strings.TrimSpace(m.Text), maxBytes)}
	for _, at := range m.Attachments {
		rm.Attachments = append(rm.Attachments, describeAttachment(at))
	}
	if rm.Text == "" && len(rm.Attachments) == 0 {
		return nil, false
	}
	b, err := json.Marshal(rm)
	if err != nil {
		return nil, false // a RoomMessage always encodes
	}
	return b, true
}

// describeAttachment says what an attachment is, never its bytes.
func describeAttachment(a channels.Attachment) string {
	d := a.Kind
	if a.Name != "" {
		d += " " + a.Name
	}
	if a.Size > 0 {
		d += fmt.Sprintf(", %d bytes", a.Size)
	}
	return d
}
