package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// CallLedger records the write-tool calls of the turns of a conversation
// so that each runs at most once, even when the same message is answered
// again (its conversation lock was lost mid-turn and another replica took
// it over). *sessions.RedisStore implements it.
type CallLedger interface {
	// BeginCall claims the call key of conv, or reports what an earlier
	// attempt left there, in one atomic step.
	BeginCall(ctx context.Context, conv, key string) (sessions.CallRecord, error)
	// EndCall records the result of a call claimed by BeginCall, in one
	// atomic step, if the claim is still the record's.
	EndCall(ctx context.Context, conv, key, claim string, result []byte) error
}

// onceGuard keeps the write calls of one turn to at most once across the
// attempts at its message. A call is known by the conversation, the inbox
// item the turn answers, its index among the turn's write calls and its
// tool: a model answering the message again makes the same writes in the
// same order, though not necessarily in the same words, so the arguments
// are not part of it.
type onceGuard struct {
	ledger CallLedger
	conv   string
	item   string
	next   int // index of the turn's next write call
}

// active reports whether write calls are guarded: a ledger and an item to
// key them by.
func (g *onceGuard) active() bool { return g != nil && g.ledger != nil && g.item != "" }

// key is the idempotency key of the turn's next write call of tool, which
// it takes.
func (g *onceGuard) key(tool string) string {
	h := sha256.New()
	for _, part := range []string{g.item, strconv.Itoa(g.next), tool} {
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	g.next++
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// recordedCall is a write call's outcome as the ledger keeps it.
type recordedCall struct {
	Content string `json:"content"`
	Outcome string `json:"outcome"`
}

// Texts of guarded calls that are not run.
const (
	callReplayed   = "[This call was already made for this message by an earlier attempt; it was not run again. Its result then:]\n"
	callUnfinished = "error: tool %s was started for this message by an earlier attempt that did not report back; it is not run again, so that it cannot happen twice. Whether it took effect is unknown: tell the user so rather than repeating it."
	callUnrecorded = "error: tool %s was not run: the call could not be recorded (the conversation store is unavailable), and a write runs only once recorded, so that it never runs twice. Try again later."
)

// callOnce runs the write call j of tool t under g: claimed first, run,
// then its result recorded; a call made before is answered from its
// record. ran reports whether the tool ran.
func (a *Agent) callOnce(ctx context.Context, log *slog.Logger, tc *TurnContext, g *onceGuard, t Tool, args json.RawMessage) (o outcome, ran bool) {
	name := t.Name()
	key := g.key(name)
	rec, err := g.ledger.BeginCall(ctx, g.conv, key)
	if err != nil {
		log.WarnContext(ctx, "write tool not run: its call cannot be recorded", "tool", name, "err", err)
		return outcome{content: fmt.Sprintf(callUnrecorded, name), result: metrics.OutcomeError}, false
	}
	switch rec.State {
	case sessions.CallDone:
		var r recordedCall
		if err := json.Unmarshal(rec.Result, &r); err != nil {
			r = recordedCall{Content: "(the recorded result cannot be read)", Outcome: metrics.OutcomeError}
		}
		log.InfoContext(ctx, "write tool call already made for this message; its recorded result is returned", "tool", name)
		return outcome{content: callReplayed + r.Content, result: r.Outcome}, false
	case sessions.CallUnfinished:
		log.WarnContext(ctx, "write tool call started by an earlier attempt that did not finish; not run again", "tool", name)
		return outcome{content: fmt.Sprintf(callUnfinished, name), result: metrics.OutcomeError}, false
	}
	view := *tc
	view.CallKey = key
	o = a.call(ctx, log, &view, t, args)
	result, _ := json.Marshal(recordedCall{Content: o.content, Outcome: o.result})
	// Recorded even when the turn is ending: the write happened.
	if err := g.ledger.EndCall(context.WithoutCancel(ctx), g.conv, key, rec.Claim, result); err != nil {
		// The claim stays: a later attempt is told the outcome is unknown
		// rather than making the call again.
		log.WarnContext(ctx, "write tool call ran but its result was not recorded", "tool", name, "err", err)
	}
	return o, true
}
