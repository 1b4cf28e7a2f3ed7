// Package sessions keeps conversation state in Redis so that any replica can
// serve any conversation: histories, the inbox that orders messages of one
// conversation, the per-conversation lock and event de-duplication.
//
// All keys of one conversation share the hash tag {conv-key}, so that the
// scripts that touch several of them run on one slot in Redis Cluster.
package sessions

import (
	"context"
	"errors"
	"time"

	"github.com/parleyhq/parley/config"
)

// Message is one entry of a history, in the shape of a chat completion
// message plus Parley's own Kind.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// ReasoningContent is what a model reasoned before the tool calls of
	// an assistant message, kept because providers such as DeepSeek (in
	// thinking mode) require it sent back with those calls in every later
	// request; ReasoningModel names the model (its key) that wrote it, the
	// only one it is sent to. It is never part of a reply.
	ReasoningContent string `json:"reasoning_content,omitempty"`
	ReasoningModel   string `json:"reasoning_model,omitempty"`
	// Kind marks messages Parley wrote itself: KindInjection for a skill
	// body, KindSummary for a compaction summary. Empty for ordinary turns.
	Kind string `json:"kind,omitempty"`
	// Usage is what the turn cost, on its final answer only. It stays
	// with the conversation and is never sent to the model.
	Usage *Usage `json:"usage,omitempty"`
	// Attachments are the images and files of a user message, by
	// reference: the bytes are never stored. Content already describes
	// each in text, so a model that is not sent the bytes (an older turn,
	// a summary) still knows they were there.
	Attachments []Attachment `json:"attachments,omitempty"`
}

// Attachment is the stored reference to one image or file of a user
// message: enough to fetch it again from the platform and to tell that
// the bytes fetched are the same.
type Attachment struct {
	Kind   string `json:"kind"`           // "image" or "file", as the bytes showed
	ID     string `json:"id"`             // the platform's file id or key
	Name   string `json:"name,omitempty"` // as the platform named it
	MIME   string `json:"mime,omitempty"` // sniffed from the bytes
	Size   int64  `json:"size,omitempty"` // bytes as fetched
	SHA256 string `json:"sha256,omitempty"`
	Width  int    `json:"width,omitempty"`
	Height int    `json:"height,omitempty"`
	// Meta is what the platform's adapter needs to fetch it again.
	Meta map[string]string `json:"meta,omitempty"`
}

// Usage is the model's tokens of one turn, every request of it together,
// and the model that answered (by its name in the configuration).
type Usage struct {
	Model      string `json:"model,omitempty"`
	Prompt     int    `json:"prompt_tokens"`
	Completion int    `json:"completion_tokens"`
	Cached     int    `json:"cached_tokens,omitempty"`
}

// Message kinds.
const (
	KindInjection = "injection"
	KindSummary   = "summary"
)

// ToolCall is one function call the model asked for.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Errors callers act on.
var (
	// ErrLockLost means the conversation lock expired or was taken by
	// another replica before the turn was written; the turn is not written.
	ErrLockLost = errors.New("sessions: conversation lock lost")
	// ErrLocked means another holder has the lock. Claim returns it as a
	// *LockedError, which says when the lock expires at the latest.
	ErrLocked = errors.New("sessions: conversation is locked")
)

// LockedError is Claim's answer for a conversation another holder has.
type LockedError struct {
	// Expires is how long the holder's lock has left unless it is renewed:
	// the latest a dead holder can keep the conversation.
	Expires time.Duration
}

func (e *LockedError) Error() string { return ErrLocked.Error() }

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// Arrival is a message for Accept: its inbox encoding and what the de-dup
// and the conversation marks need.
type Arrival struct {
	// Item is the message as the inbox keeps it.
	Item []byte
	// Limit is how many messages may wait in the inbox; an arrival beyond
	// it is not queued (QueueFull).
	Limit int
	// ID is the platform's id for the message; an arrival whose ID was
	// accepted within the de-dup TTL is a Duplicate and changes nothing.
	// Empty: never a duplicate.
	ID string
	// Marks are flags of the conversation to set (or refresh) with the
	// arrival; they expire with the history.
	Marks []string
	// RequireMark, when set, names a mark the conversation must already
	// have: without it the arrival is Unmarked and changes nothing.
	RequireMark string
	// Sender is who sent it. While the conversation's turn waits for that
	// person's answer to a question (Ask), the arrival is their answer:
	// it is handed to the turn (Answered), not queued.
	Sender string
	// AnswerOnly marks an arrival that can only be an answer (a click on
	// a question's button): from anyone but the person asked, or with no
	// question open, it is NotAsked and changes nothing.
	AnswerOnly bool
}

// Acceptance is what Accept did with an arrival.
type Acceptance int

// Outcomes of Accept.
const (
	// Queued: the message waits in the inbox; its id and marks are recorded.
	Queued Acceptance = iota
	// Duplicate: the id was seen before; nothing changed.
	Duplicate
	// QueueFull: the inbox is at its limit; the id and the marks are
	// recorded (the sender is told, and a re-delivery must not be told
	// twice), the message is not queued.
	QueueFull
	// Unmarked: the conversation lacks Arrival.RequireMark; nothing changed.
	Unmarked
	// Answered: the arrival is the answer the conversation's turn waits
	// for (see Ask); its id is recorded, and it waits for TakeAnswer.
	Answered
	// NotAsked: an AnswerOnly arrival from someone not asked, or with no
	// question open; nothing changed.
	NotAsked
)

// Claim is a conversation taken by one holder for one turn: the lock, the
// oldest queued message and the history, read in the same step.
type Claim struct {
	Lock *Lock
	// Item is the oldest queued message, as Accept stored it.
	Item []byte
	// History is the conversation's history, oldest first.
	History History
	// Queued counts the messages waiting, Item included.
	Queued int64
	// Approval: the conversation's "approval" part (Key(conv,
	// "approval"), where a turn paused for an approval keeps its record)
	// exists. It is read with the claim so that a turn that did not pause
	// costs no round trip to find that out; under the lock, no record can
	// appear before the turn looks.
	Approval bool
	// LiveReply is the reference of the live reply an earlier attempt at
	// Item showed and did not finish (its holder died mid-answer; see
	// RecordLiveReply), or "". It is read with the claim, so that a turn
	// costs no round trip to find it.
	LiveReply string
	// Room is the conversation's room as the claim found it: the last
	// read's cursor and the ambient messages kept (see Rooms).
	Room RoomState
}

// Completion is what Complete reports.
type Completion struct {
	// Trimmed: the history was cut to its maximum length.
	Trimmed bool
	// Queued counts the messages still waiting after the completed one;
	// the holder that completed should see that they are served.
	Queued int64
}

// Store is the conversation state shared by all replicas.
//
// A message goes through three steps, each one atomic: Accept (de-dup,
// marks and enqueue), Claim (lock, oldest message and history), Complete
// (the turn appended, the message removed, the lock released).
type Store interface {
	// Accept records an arrival on conv in one step; see Acceptance.
	Accept(ctx context.Context, conv string, a Arrival) (Acceptance, error)
	// Claim takes conv's lock and returns it with the oldest queued
	// message and the history. It returns nil, nil when nothing is queued
	// (without taking the lock) and a *LockedError when another holder
	// has the lock. The lock renews itself until Release or Complete, or
	// until ctx ends.
	Claim(ctx context.Context, conv string) (*Claim, error)
	// Complete appends msgs (none: nothing) to the history, removes item
	// from the head of the inbox, refreshes the TTLs, trims the history to
	// its maximum length and releases the lock, in one step. It fails with
	// ErrLockLost, writing nothing, unless lock still holds the
	// conversation. After an error other than ErrLockLost the lock is
	// still held and Complete may be called again. Each of along queues a
	// write to another slot in the same pipeline (see Along); it is sent
	// whatever becomes of the completion.
	Complete(ctx context.Context, lock *Lock, item []byte, msgs []Message, along ...Along) (Completion, error)
	// RecordLiveReply records, while lock is held, ref: the live reply to
	// item shown so far, for the next holder to finish should this one
	// stop before Complete (Claim.LiveReply), which forgets it.
	RecordLiveReply(ctx context.Context, lock *Lock, item []byte, ref string) error

	// History returns the conversation's messages, oldest first.
	History(ctx context.Context, conv string) ([]Message, error)
	// ReplaceHistory swaps the whole history (compaction), under lock.
	ReplaceHistory(ctx context.Context, lock *Lock, msgs []Message) error
	// Clear deletes the conversation's history.
	Clear(ctx context.Context, conv string) error

	// Orphans lists conversations with queued messages and no lock holder:
	// what a replica that died between accepting and answering left behind.
	Orphans(ctx context.Context) ([]string, error)

	// TryLock takes the conversation lock or fails with ErrLocked. The lock
	// renews itself until Release or until ctx ends.
	TryLock(ctx context.Context, conv string) (*Lock, error)

	// Seen records id under scope and reports whether it was seen before
	// (within 24 h).
	Seen(ctx context.Context, scope, id string) (bool, error)

	// BeginCall and EndCall record a write-tool call of conv under key, so
	// that it runs at most once however often its message is answered:
	// BeginCall claims it or says what an earlier attempt left, EndCall
	// records the result of the claimed call. Each is one atomic step.
	BeginCall(ctx context.Context, conv, key string) (CallRecord, error)
	EndCall(ctx context.Context, conv, key, claim string, result []byte) error

	// Ping checks that the backing Redis answers.
	Ping(ctx context.Context) error
	// Close releases connections (and stops an embedded server).
	Close() error
}

// DefaultDedupeTTL is how long a platform's event id is remembered.
const DefaultDedupeTTL = 24 * time.Hour

// Options bound what a conversation may hold. Zero fields take the
// defaults of the file (DefaultConfig, config.DefaultRedisPrefix).
type Options struct {
	Prefix      string        // key prefix, e.g. "parley:"
	HistoryTTL  time.Duration // refreshed on every turn
	MaxMessages int           // history length cap
	LockTTL     time.Duration // a dead holder's lock expires after this
	DedupeTTL   time.Duration // default DefaultDedupeTTL
	// AmbientMessages, AmbientBytes and AmbientAge bound a conversation's
	// ambient buffer (see room.go): past them the oldest go. Defaults
	// DefaultAmbientMessages, DefaultAmbientBytes, DefaultAmbientAge.
	AmbientMessages int
	AmbientBytes    int
	AmbientAge      time.Duration
}

func (o Options) withDefaults() Options {
	d := DefaultConfig()
	if o.Prefix == "" {
		o.Prefix = config.DefaultRedisPrefix
	}
	if o.HistoryTTL <= 0 {
		o.HistoryTTL = d.HistoryTTL
	}
	if o.MaxMessages <= 0 {
		o.MaxMessages = d.MaxMessages
	}
	if o.LockTTL <= 0 {
		o.LockTTL = d.LockTTL
	}
	if o.DedupeTTL <= 0 {
		o.DedupeTTL = DefaultDedupeTTL
	}
	if o.AmbientMessages <= 0 {
		o.AmbientMessages = DefaultAmbientMessages
	}
	if o.AmbientBytes <= 0 {
		o.AmbientBytes = DefaultAmbientBytes
	}
	if o.AmbientAge <= 0 {
		o.AmbientAge = DefaultAmbientAge
	}
	return o
}
