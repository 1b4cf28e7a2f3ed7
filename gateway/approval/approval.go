// Package approval keeps the tool calls that wait for a person's approval
// in Redis, and decides them exactly once.
//
// A turn that reaches a call needing approval pauses: its state and the
// call are written under the conversation (one record per conversation,
// since the conversation waits), and the conversation lock, in the same
// script, is handed from the turn's holder to the approval itself, with the
// approval's timeout as its life. While the approval is pending, the
// conversation is locked: its other messages queue behind it, as they do
// behind a running turn, and no replica claims it.
//
// A decision (approve, deny, cancel) is one script: it changes a pending
// record and frees the lock, or reports the decision somebody made before.
// Whoever claims the conversation next finds the decided record with the
// message the turn paused on and resumes the turn. If nobody decides, the
// lock expires with the approval; the replica that claims the conversation
// then (the sweep finds it) marks the record expired, in a script that
// cannot race a decision, since a decision needs the approval's lock.
//
// The package depends on Redis and nothing of the gateway's.
package approval

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// States of an approval.
const (
	Pending   = "pending"
	Approved  = "approved"
	Denied    = "denied"
	Expired   = "expired"
	Cancelled = "cancelled"
)

// Errors callers act on.
var (
	// ErrLockLost: the turn's holder no longer holds the conversation, so
	// the turn cannot pause; nothing was written.
	ErrLockLost = errors.New("approval: conversation lock lost")
	// ErrUnknown: no approval of that conversation matches (none pending,
	// another code, another conversation's). The caller answers without
	// saying which.
	ErrUnknown = errors.New("approval: no such approval")
)

// Request is a call waiting for approval, as stored.
type Request struct {
	// ID names the approval in buttons and logs; Code is the short code
	// people type.
	ID   string `json:"id"`
	Code string `json:"code"`
	// Conversation is the conversation key; Item names the queued message
	// the paused turn answers.
	Conversation string `json:"conversation"`
	Item         string `json:"item"`
	Channel      string `json:"channel"`
	// Tool and Args are the call, Args as the model sent them.
	Tool string `json:"tool"`
	Args string `json:"args"`
	// Requester is the user whose message led to the call.
	Requester     string    `json:"requester"`
	RequesterName string    `json:"requester_name,omitempty"`
	Created       time.Time `json:"created"`
	Expires       time.Time `json:"expires"`
	// Turn is the paused turn, as the agent encoded it.
	Turn json.RawMessage `json:"turn"`
}

// Record is a stored approval with its decision.
type Record struct {
	Request
	State string
	// By and ByName name who decided (empty for expiry); At is when.
	By, ByName string
	At         time.Time
	// ReplyTo is what the decider asked to be answered on, when the
	// decision gave one (see Decide): opaque here.
	ReplyTo json.RawMessage
	// Prompt names the posted prompt, as SetPrompt stored it (nil when
	// it was not stored): opaque here.
	Prompt map[string]string
}

// Decider is whoever decides: the id policies match and the name people read.
func (r Record) Decider() string {
	if r.ByName != "" {
		return r.ByName
	}
	return r.By
}

// Store keeps approvals in the conversation's part of Redis.
type Store struct {
	client redis.UniversalClient
	key    func(conv, kind string) string
	// Grace is how long a record outlives its timeout, so that a decision
	// made at the last moment is still there for the replica that resumes
	// the turn (0: DefaultGrace).
	grace time.Duration
}

// DefaultGrace keeps a record a day past its timeout.
const DefaultGrace = 24 * time.Hour

// New returns a Store on client; key names a conversation's keys (the
// sessions store's Key), so that the lock is the conversation's own.
func New(client redis.UniversalClient, key func(conv, kind string) string) *Store {
	return &Store{client: client, key: key, grace: DefaultGrace}
}

// marker is the lock's value while the approval id waits.
func marker(id string) string { return "approval:" + id }

// NewRequest fills in a request's id, code and times.
func NewRequest(now time.Time, timeout time.Duration) Request {
	return Request{ID: rand.Text(), Code: newCode(), Created: now, Expires: now.Add(timeout)}
}

// codeAlphabet leaves out the letters and digits people confuse (0/O,
// 1/I/L).
const codeAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"

// newCode is a six-character code: with one approval pending per
// conversation, it only has to be hard to guess, not unique.
func newCode() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = codeAlphabet[int(b[i])%len(codeAlphabet)]
	}
	return string(b[:])
}

// NormalCode is a typed code as stored: trimmed and upper-case.
func NormalCode(code string) string { return strings.ToUpper(strings.TrimSpace(code)) }

// pauseScript hands the conversation from the turn's holder to the
// approval: the record written as pending, the lock's value replaced by
// the approval's marker for the timeout.
//
// KEYS: lock, record. ARGV: token, marker, timeout ms, record TTL ms, id,
// code, request.
var pauseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'id', ARGV[5], 'code', ARGV[6], 'state', 'pending', 'req', ARGV[7])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`)

// Pause writes req as pending and hands the conversation's lock, held with
// token, to it, in one step. It fails with ErrLockLost, writing nothing,
// unless token still holds the lock. The caller then stops renewing its
// lock without releasing it (sessions.Lock.Detach).
func (s *Store) Pause(ctx context.Context, token string, req Request) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("approval: encode request: %w", err)
	}
	timeout := time.Until(req.Expires)
	if timeout < time.Millisecond {
		timeout = time.Millisecond
	}
	conv := req.Conversation
	n, err := pauseScript.Run(ctx, s.client, []string{s.key(conv, "lock"), s.key(conv, "approval")},
		token, marker(req.ID), timeout.Milliseconds(), (timeout + s.grace).Milliseconds(), req.ID, req.Code, body).Int()
	if err != nil {
		return fmt.Errorf("approval: pause the turn: %w", err)
	}
	if n == 0 {
		return ErrLockLost
	}
	return nil
}

// Get returns conv's approval record, or nil when there is none.
func (s *Store) Get(ctx context.Context, conv string) (*Record, error) {
	return s.read(ctx, s.key(conv, "approval"))
}

// Finished returns the record Drop left of conv's last approval once its
// turn was written (for FinishedFor), or nil: a click that comes after
// that is answered with who decided, not as a code that never existed.
func (s *Store) Finished(ctx context.Context, conv string) (*Record, error) {
	return s.read(ctx, s.key(conv, "approval-done"))
}

func (s *Store) read(ctx context.Context, key string) (*Record, error) {
	f, err := s.client.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("approval: read: %w", err)
	}
	if len(f) == 0 {
		return nil, nil
	}
	rec, err := parse(f["req"], f["state"], f["by"], f["by_name"], f["at"])
	if err == nil && f["reply_to"] != "" {
		rec.ReplyTo = json.RawMessage(f["reply_to"])
	}
	if err == nil {
		rec.Prompt = parsePrompt(f["prompt"])
	}
	return rec, err
}

// parsePrompt reads a stored prompt reference; a bad one reads as none.
func parsePrompt(s string) map[string]string {
	if s == "" {
		return nil
	}
	var ref map[string]string
	if json.Unmarshal([]byte(s), &ref) != nil {
		return nil
	}
	return ref
}

// setPromptScript stores the prompt reference of approval ARGV[1], if
// the record is still that approval's.
var setPromptScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'prompt', ARGV[2])
return 1
`)

// SetPrompt keeps ref, what names the posted prompt of conv's approval id,
// with the record, so that whichever replica learns the decision or the
// expiry can update the prompt. A record that is gone or another
// approval's is left alone.
func (s *Store) SetPrompt(ctx context.Context, conv, id string, ref map[string]string) error {
	if len(ref) == 0 {
		return nil
	}
	body, err := json.Marshal(ref)
	if err != nil {
		return fmt.Errorf("approval: encode prompt: %w", err)
	}
	if err := setPromptScript.Run(ctx, s.client, []string{s.key(conv, "approval")}, id, body).Err(); err != nil {
		return fmt.Errorf("approval: store prompt: %w", err)
	}
	return nil
}

func parse(req, state, by, byName, at string) (*Record, error) {
	r := &Record{State: state, By: by, ByName: byName}
	if err := json.Unmarshal([]byte(req), &r.Request); err != nil {
		return nil, fmt.Errorf("approval: stored request: %w", err)
	}
	if ms, err := strconv.ParseInt(at, 10, 64); err == nil && ms > 0 {
		r.At = time.UnixMilli(ms)
	}
	return r, nil
}

// decideScript decides a pending approval whose id or code is ARGV[1] (”
// matches any): while its lock still stands it records the decision and
// frees the lock. It answers {1} (decided here), {2, record…} (decided
// before: the record says by whom), {3} (its time ran out) or {0} (no
// such approval). A named approval whose turn is already written is found
// in the finished record Drop leaves, so a late click still hears who
// decided.
//
// KEYS: record, lock, finished record. ARGV: id or code, state, by, by
// name, at ms, reply-to.
var decideScript = redis.NewScript(`
local f = redis.call('HMGET', KEYS[1], 'id', 'code', 'state', 'req', 'by', 'by_name', 'at', 'prompt')
if not f[1] or (ARGV[1] ~= '' and ARGV[1] ~= f[1] and ARGV[1] ~= f[2]) then
  if ARGV[1] == '' then return {0} end
  f = redis.call('HMGET', KEYS[3], 'id', 'code', 'state', 'req', 'by', 'by_name', 'at', 'prompt')
  if not f[1] or (ARGV[1] ~= f[1] and ARGV[1] ~= f[2]) then return {0} end
end
if f[3] ~= 'pending' then return {2, f[4], f[3], f[5] or '', f[6] or '', f[7] or '', f[8] or ''} end
if redis.call('GET', KEYS[2]) ~= 'approval:' .. f[1] then return {3} end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'by', ARGV[3], 'by_name', ARGV[4], 'at', ARGV[5], 'reply_to', ARGV[6])
redis.call('DEL', KEYS[2])
return {1}
`)

// Outcome is what Decide did.
type Outcome int

// Outcomes of Decide.
const (
	// Decided: this call decided the approval; the conversation is free
	// for the turn to resume.
	Decided Outcome = iota
	// Already: somebody decided it before; the record says who and how.
	Already
	// TooLate: its time ran out before the decision; it is resumed as
	// expired.
	TooLate
)

// Decide records state (Approved, Denied or Cancelled) by user for conv's
// pending approval whose id or code is match ("" matches whichever is
// pending), in one step: of any number of concurrent calls, one gets
// Decided. A match that names no approval of conv is ErrUnknown. The
// record returned is the decision in force (nil for TooLate).
//
// replyTo, kept with the decision, is where the resumed turn's answer
// goes on a platform whose sender waits for an answer to each message
// (nil: none).
func (s *Store) Decide(ctx context.Context, conv, match, state, by, byName string, at time.Time, replyTo json.RawMessage) (Outcome, *Record, error) {
	switch state {
	case Approved, Denied, Cancelled:
	default:
		return 0, nil, fmt.Errorf("approval: %q is not a decision", state)
	}
	// Ids (rand.Text) and codes are upper-case: a typed code need not be.
	match = NormalCode(match)
	res, err := decideScript.Run(ctx, s.client, []string{s.key(conv, "approval"), s.key(conv, "lock"), s.key(conv, "approval-done")},
		match, state, by, byName, at.UnixMilli(), string(replyTo)).Slice()
	if err != nil {
		return 0, nil, fmt.Errorf("approval: decide: %w", err)
	}
	status, _ := res[0].(int64)
	switch {
	case status == 0:
		return 0, nil, ErrUnknown
	case status == 1:
		rec, err := s.Get(ctx, conv)
		if err != nil || rec == nil {
			// Decided all the same; the record is only for the answer.
			return Decided, &Record{State: state, By: by, ByName: byName, At: at}, nil
		}
		return Decided, rec, nil
	case status == 3:
		return TooLate, nil, nil
	case status == 2 && len(res) == 7:
		str := func(v any) string { s, _ := v.(string); return s }
		rec, err := parse(str(res[1]), str(res[2]), str(res[3]), str(res[4]), str(res[5]))
		if err != nil {
			return 0, nil, err
		}
		rec.Prompt = parsePrompt(str(res[6]))
		return Already, rec, nil
	}
	return 0, nil, fmt.Errorf("approval: decide: unexpected reply %v", res)
}

// expireScript marks the pending approval id expired. Its caller holds the
// conversation's lock (the approval's own ran out), so no decision can
// come between.
//
// KEYS: record. ARGV: id, at ms. Returns 1 when it expired it.
var expireScript = redis.NewScript(`
local f = redis.call('HMGET', KEYS[1], 'id', 'state')
if f[1] ~= ARGV[1] or f[2] ~= 'pending' then return 0 end
redis.call('HSET', KEYS[1], 'state', 'expired', 'at', ARGV[2])
return 1
`)

// Expire marks conv's pending approval id expired and reports whether it
// did (false: it was decided, or is gone). Call it holding the
// conversation's lock.
func (s *Store) Expire(ctx context.Context, conv, id string, at time.Time) (bool, error) {
	n, err := expireScript.Run(ctx, s.client, []string{s.key(conv, "approval")}, id, at.UnixMilli()).Int()
	if err != nil {
		return false, fmt.Errorf("approval: expire: %w", err)
	}
	return n == 1, nil
}

// dropScript moves the record, if it is still approval ARGV[1]'s, out of
// the conversation's way to the finished record, kept ARGV[2] ms.
//
// KEYS: record, finished record.
var dropScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then return 0 end
redis.call('RENAME', KEYS[1], KEYS[2])
redis.call('HDEL', KEYS[2], 'req', 'reply_to')
redis.call('HSET', KEYS[2], 'req', ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
`)

// FinishedFor is how long a dropped approval is remembered: a click that
// arrives after the turn is written (a double click, a platform's
// re-delivery, a second replica) still hears who decided, rather than
// that no such approval exists.
const FinishedFor = time.Hour

// Drop deletes conv's approval id once its turn is written (a newer
// approval of the conversation stays). Only who decided, how and when is
// kept, for FinishedFor: the paused turn's state goes.
func (s *Store) Drop(ctx context.Context, conv, id string) error {
	rec, err := s.Get(ctx, conv)
	if err != nil {
		return err
	}
	if rec == nil || rec.ID != id {
		return nil
	}
	// The request without the paused turn: the tool and arguments still
	// name what was decided.
	rec.Turn = nil
	req, err := json.Marshal(rec.Request)
	if err != nil {
		return fmt.Errorf("approval: encode request: %w", err)
	}
	if err := dropScript.Run(ctx, s.client, []string{s.key(conv, "approval"), s.key(conv, "approval-done")}, id, FinishedFor.Milliseconds(), req).Err(); err != nil {
		return fmt.Errorf("approval: drop: %w", err)
	}
	return nil
}
