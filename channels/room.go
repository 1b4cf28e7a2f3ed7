package channels

import (
	"context"
	"errors"
	"time"
)

// The room is what other people wrote where the bot was asked: the thread
// of a Slack mention, a Feishu topic, the group's last messages before a
// top-level mention. An adapter whose platform can read it back
// implements RoomReader; the gateway reads it at most once per turn,
// under the conversation's lock, only what is new since its last read
// (it keeps the Cursor with the conversation), and hands it to the model
// as untrusted data in the user turn.
//
// A platform that cannot read back (no history API) but receives the
// messages it is not addressed in submits them with Message.Ambient set:
// the gateway keeps them, bounded, for the next addressed turn of that
// chat instead of answering them.

// RoomQuery says which part of a room to read.
type RoomQuery struct {
	// Message is the message being answered: its Workspace, Chat, Thread
	// and Meta say where the room is. The reader leaves it out of the
	// result.
	Message Message
	// Thread asks for the thread Message is in (Message.Thread set, or
	// the Meta an adapter keeps for it).
	Thread bool
	// Recent asks for up to this many of the chat's messages before
	// Message when it starts no thread of its own (a top-level mention);
	// 0 reads none.
	Recent int
	// Since is the Cursor of the previous read of this room, "" on the
	// first: only what is newer is read. A cursor a little past Message
	// (CursorLead) means a later message's turn ran first — two arrivals
	// at once, taken in the other order — and read everything up to its
	// own: nothing is read again. One further ahead cannot be a read of
	// this room, and is ignored.
	Since string
	// Max bounds the messages returned (the newest are kept) and the
	// pages read; a thread of 10,000 messages never reads them all.
	Max int
}

// CursorLead is how far past a message a cursor may be and still be a
// read of its room that came first: messages of one conversation are
// taken in the order they arrived, and only ones that arrive nearly
// together can be taken in the other order of their platform times.
const CursorLead = time.Hour

// RoomMessage is one message of the room, as the platform gave it.
type RoomMessage struct {
	// ID is the platform's id of the message (a Slack ts, a Feishu
	// message_id).
	ID string
	// Author is the sender's platform id; AuthorName their display name
	// when known ("" when not).
	Author     string
	AuthorName string
	Time       time.Time
	// Text is the message as text, in the adapter's plain rendering.
	Text string
	// Attachments describe what the message carries ("image photo.png",
	// "file report.pdf, 2 MB"): never its bytes.
	Attachments []string
	// Bot marks a message of this bot (its earlier answers): the gateway
	// leaves these out, since the history already holds them.
	Bot bool
}

// Room is what one read returned.
type Room struct {
	// Messages are oldest first, without Message itself.
	Messages []RoomMessage
	// Cursor is where the next read of this room starts (Since). ""
	// keeps the previous one.
	Cursor string
	// Omitted counts messages the reader knows of but did not return
	// (over Max).
	Omitted int
}

// RoomReader is implemented by adapters that can read a room back.
// ReadRoom returns what it could read even when it fails part way: a
// Room with some messages and an error wrapping ErrRoomRateLimited or
// ErrRoomDenied (or any other) is answered from those messages; the
// error is counted and logged, never the turn's failure.
type RoomReader interface {
	ReadRoom(ctx context.Context, q RoomQuery) (Room, error)
}

var (
	// ErrRoomRateLimited: the platform refused a read for its rate limit
	// (Slack's 429 with Retry-After, Feishu's 99991400).
	ErrRoomRateLimited = errors.New("channels: the platform rate-limited reading the room")
	// ErrRoomDenied: the app lacks the scope or permission to read there
	// (Slack's missing_scope, not_in_channel; Feishu's no permission).
	ErrRoomDenied = errors.New("channels: the app may not read the room")
)
