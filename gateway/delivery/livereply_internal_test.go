package delivery

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// namedSink shows everything and names the messages it shows: a new one
// every rollEvery pieces of text.
type namedSink struct {
	rollEvery int
	mu        sync.Mutex
	texts     int
	shown     chan struct{}
}

func (s *namedSink) Show(_ context.Context, p channels.Progress) (bool, error) {
	s.mu.Lock()
	if p.Kind == channels.ProgressText {
		s.texts++
	}
	s.mu.Unlock()
	s.shown <- struct{}{}
	return true, nil
}
func (s *namedSink) Finish(context.Context, channels.Reply) error { return nil }
func (s *namedSink) Discard(context.Context) error                { return nil }
func (s *namedSink) Reference() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.texts == 0 {
		return ""
	}
	return string(rune('a' + (s.texts-1)/s.rollEvery))
}

// countingReplies counts the records made, passing them to the store.
type countingReplies struct {
	store *sessions.RedisStore
	mu    sync.Mutex
	refs  []string
}

func (c *countingReplies) RecordLiveReply(ctx context.Context, lock *sessions.Lock, item []byte, ref string) error {
	c.mu.Lock()
	c.refs = append(c.refs, ref)
	c.mu.Unlock()
	return c.store.RecordLiveReply(ctx, lock, item, ref)
}

// TestALiveReplyIsRecordedWhenItsMessagesChange: a live reply is recorded
// with its turn when it first shows, and again only when the messages it
// names change (a stream rolling over), not at every piece of text; the
// next claim of the message reads the last record.
func TestALiveReplyIsRecordedWhenItsMessagesChange(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Minute})
	ctx := context.Background()
	conv := "slack:T1:C1:1.1"
	if _, err := store.Accept(ctx, conv, sessions.Arrival{Item: []byte("question"), Limit: 10}); err != nil {
		t.Fatal(err)
	}
	c, err := store.Claim(ctx, conv)
	if err != nil || c == nil {
		t.Fatalf("Claim = %v, %v", c, err)
	}
	replies := &countingReplies{store: store}
	d := New(Config{Replies: replies, Metrics: metrics.New(), Log: slog.New(slog.DiscardHandler)})
	sink := &namedSink{rollEvery: 3, shown: make(chan struct{}, 16)}
	l := Route{d: d, m: channels.Message{Channel: "x", Received: time.Now()}}.live(ctx, sink, c, 0)
	for range 6 { // one at a time, so that none is merged with another
		l.event(agent.Event{Kind: agent.EventText, Text: "word "})
		<-sink.shown
	}
	l.stop()
	if got := replies.refs; len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("recorded %q; want the first message, then the one it rolled over into", got)
	}
	c.Lock.Detach()
	if err := r.Client.Del(ctx, store.Key(conv, "lock")).Err(); err != nil {
		t.Fatal(err)
	}
	next, err := store.Claim(ctx, conv)
	if err != nil || next == nil || next.LiveReply != "b" {
		t.Fatalf("the next claim = %+v, %v; want the last record", next, err)
	}
}

// lostAnswerReplies records, then loses the answer: the write ran, its
// reply never came back. Each record written is said on recorded.
type lostAnswerReplies struct {
	store    *sessions.RedisStore
	recorded chan struct{}
}

func (l lostAnswerReplies) RecordLiveReply(ctx context.Context, lock *sessions.Lock, item []byte, ref string) error {
	if err := l.store.RecordLiveReply(ctx, lock, item, ref); err != nil {
		return err
	}
	l.recorded <- struct{}{}
	return io.ErrUnexpectedEOF
}

// discardCounter is a namedSink that counts its discards.
type discardCounter struct {
	namedSink
	discards atomic.Int32
}

func (s *discardCounter) Discard(context.Context) error { s.discards.Add(1); return nil }

// TestALiveReplyWhoseRecordMayHaveLandedIsLeftToTheNextHolder: a record
// whose write's answer was lost may be in Redis, and the holder that
// takes the conversation over then finishes the reply; the turn that
// wrote it, its lock passed on, leaves the reply alone instead of
// deleting what the other is finishing.
func TestALiveReplyWhoseRecordMayHaveLandedIsLeftToTheNextHolder(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Second})
	ctx := context.Background()
	conv := "slack:T1:C1:2.2"
	if _, err := store.Accept(ctx, conv, sessions.Arrival{Item: []byte("question"), Limit: 10}); err != nil {
		t.Fatal(err)
	}
	c, err := store.Claim(ctx, conv)
	if err != nil || c == nil {
		t.Fatalf("Claim = %v, %v", c, err)
	}
	replies := lostAnswerReplies{store: store, recorded: make(chan struct{}, 16)}
	d := New(Config{Replies: replies, Metrics: metrics.New(), Log: slog.New(slog.DiscardHandler)})
	sink := &discardCounter{namedSink: namedSink{rollEvery: 100, shown: make(chan struct{}, 16)}}
	l := Route{d: d, m: channels.Message{Channel: "x", Received: time.Now()}}.live(ctx, sink, c, 0)
	l.event(agent.Event{Kind: agent.EventText, Text: "half an answer"})
	<-sink.shown
	// The record is written (and its answer lost) before the lock moves
	// on: taken over sooner, the write would find the lock lost and say so.
	<-replies.recorded
	// Another holder takes the conversation over.
	if err := r.Client.Set(ctx, store.Key(conv, "lock"), "another", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !c.Lock.MayBeAnothers() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	l.Discard(ctx)
	if n := sink.discards.Load(); n != 0 {
		t.Fatalf("the reply was deleted %d times; the holder that took over finishes it", n)
	}
}
