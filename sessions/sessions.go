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
	// Kind marks messages Parley wrote itself: KindInjection for a skill
	// body, KindSummary for a compaction summary. Empty for ordinary turns.
	Kind string `json:"kind,omitempty"`
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
	// ErrLocked means another holder has the lock.
	ErrLocked = errors.New("sessions: conversation is locked")
	// ErrQueueFull means the conversation's inbox is at its limit.
	ErrQueueFull = errors.New("sessions: conversation queue is full")
)

// Store is the conversation state shared by all replicas.
type Store interface {
	// History returns the conversation's messages, oldest first.
	History(ctx context.Context, conv string) ([]Message, error)
	// CommitTurn appends a whole turn and removes item from the head of the
	// inbox in one atomic step, refreshing the TTL and trimming the history
	// to its maximum length. It fails with ErrLockLost, writing nothing,
	// unless lock still holds the conversation.
	CommitTurn(ctx context.Context, lock *Lock, msgs []Message, item []byte) (trimmed bool, err error)
	// ReplaceHistory swaps the whole history (compaction), under lock.
	ReplaceHistory(ctx context.Context, lock *Lock, msgs []Message) error
	// Clear deletes the conversation's history.
	Clear(ctx context.Context, conv string) error

	// Enqueue appends an encoded message to the conversation's inbox
	// unless limit messages already wait there (ErrQueueFull), in one step.
	Enqueue(ctx context.Context, conv string, item []byte, limit int) (depth int64, err error)
	// Head returns the oldest inbox item, or ok=false when it is empty.
	Head(ctx context.Context, conv string) (item []byte, ok bool, err error)
	// Ack removes item from the head of the inbox without writing history
	// (commands, refusals), under lock.
	Ack(ctx context.Context, lock *Lock, item []byte) error

	// Orphans lists conversations with queued messages and no lock holder:
	// what a replica that died between accepting and answering left behind.
	Orphans(ctx context.Context) ([]string, error)

	// TryLock takes the conversation lock or fails with ErrLocked. The lock
	// renews itself until Release or until ctx ends.
	TryLock(ctx context.Context, conv string) (*Lock, error)

	// Seen records id under scope and reports whether it was seen before
	// (within 24 h).
	Seen(ctx context.Context, scope, id string) (bool, error)
	// Forget removes a Seen record, so that a message accepted by Seen but
	// then not queued is taken again when the platform re-delivers it.
	Forget(ctx context.Context, scope, id string) error

	// Ping checks that the backing Redis answers.
	Ping(ctx context.Context) error
	// Close releases connections (and stops an embedded server).
	Close() error
}

// DefaultDedupeTTL is how long a platform's event id is remembered.
const DefaultDedupeTTL = 24 * time.Hour

// Options bound what a conversation may hold. Zero fields take the file's
// defaults (config.Default*).
type Options struct {
	Prefix      string        // key prefix, e.g. "parley:"
	HistoryTTL  time.Duration // refreshed on every turn
	MaxMessages int           // history length cap
	LockTTL     time.Duration // a dead holder's lock expires after this
	DedupeTTL   time.Duration // default DefaultDedupeTTL
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = config.DefaultRedisPrefix
	}
	if o.HistoryTTL <= 0 {
		o.HistoryTTL = config.DefaultHistoryTTL
	}
	if o.MaxMessages <= 0 {
		o.MaxMessages = config.DefaultMaxMessages
	}
	if o.LockTTL <= 0 {
		o.LockTTL = config.DefaultLockTTL
	}
	if o.DedupeTTL <= 0 {
		o.DedupeTTL = DefaultDedupeTTL
	}
	return o
}
