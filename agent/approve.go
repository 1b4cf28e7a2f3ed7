package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// A call that needs a person's approval pauses its turn: Run returns a
// TurnResult with Paused set instead of an answer, holding everything the
// turn has done so far (its messages, the calls of the batch that already
// ran, the counters), encoded. Whoever holds the conversation when the
// approval is decided, on any replica, calls Run again with Resume: the
// turn continues at the paused call, which runs (approved) or gets the
// refusal as its result (denied, expired), then the rest of its batch, and
// the model goes on from there.

// Paused is a turn waiting for approval of Call.
type Paused struct {
	Call   sessions.ToolCall
	Writes bool
	// State is the paused turn, for Resume.State; opaque to the caller.
	State json.RawMessage
}

// Resume continues a paused turn.
type Resume struct {
	State   json.RawMessage
	Verdict Verdict
}

// Verdict is the decision on a paused call.
type Verdict struct {
	// Approved runs the call.
	Approved bool
	// Refusal is the call's result when it is not approved, e.g.
	// "denied by Alice".
	Refusal string
	// Stop ends the turn without running the call or asking the model
	// again (the user cancelled it): only the user's message is kept, and
	// the reply is empty.
	Stop bool
	// By is who decided, for the audit ledger.
	By string
}

// batch is the tool calls of one model answer and the outcomes of those
// that have run, in call order.
type batch struct {
	Calls       []sessions.ToolCall `json:"calls"`
	LimitN      int                 `json:"limit_n"`
	LimitReason string              `json:"limit_reason,omitempty"`
	Done        []doneCall          `json:"done,omitempty"`
}

// doneCall is an outcome as a paused turn keeps it.
type doneCall struct {
	Content string             `json:"content"`
	Inject  []sessions.Message `json:"inject,omitempty"`
	Send    []Outgoing         `json:"send,omitempty"`
	Result  string             `json:"result"`
}

// pausedTurn is Paused.State.
type pausedTurn struct {
	Turn       []sessions.Message `json:"turn"`
	Keep       int                `json:"keep"` // leading messages of Turn kept on failure: preface and user
	Batch      batch              `json:"batch"`
	Calls      int                `json:"calls"`
	Iterations int                `json:"iterations"`
	OnceNext   int                `json:"once_next"`
	// Sends are the files the turn's earlier batches asked to send: they
	// go with the answer, whichever replica resumes the turn.
	Sends []Outgoing `json:"sends,omitempty"`
	// FilesKept counts the files the turn kept, against files.max_per_turn.
	FilesKept int `json:"files_kept,omitempty"`
}

// needsApproval returns the index, from b's first call not run yet, of the
// first call that would run and that approve says needs approval, or
// len(b.Calls). Calls that cannot run (capped, unknown, not allowed, bad
// arguments) are answered by runTools without asking anyone.
func (a *Agent) needsApproval(b *batch, allow func(string) bool, approve func(string, bool) bool) int {
	if approve == nil {
		return len(b.Calls)
	}
	for i := len(b.Done); i < len(b.Calls); i++ {
		c := b.Calls[i]
		t, ok := a.tools.Get(c.Name)
		if i >= b.LimitN || !ok || allow != nil && !allow(c.Name) || !isAvailable(t) || !isJSONObject([]byte(c.Arguments)) {
			continue
		}
		if approve(c.Name, t.Writes()) {
			return i
		}
	}
	return len(b.Calls)
}

// runBatch runs b's calls that have not run, in order, up to the first
// that needs approval. A verdict decides that call (and only that one);
// without one runBatch returns it, and the turn pauses there.
func (a *Agent) runBatch(ctx context.Context, log *slog.Logger, tc *TurnContext, b *batch, allow func(string) bool, approve func(string, bool) bool, verdict *Verdict, once *onceGuard) *sessions.ToolCall {
	base := tc.History
	for len(b.Done) < len(b.Calls) {
		from := len(b.Done)
		// The calls to run see what the batch's earlier calls injected.
		tc.History = base[:len(base):len(base)]
		for _, d := range b.Done {
			tc.History = append(tc.History, d.Inject...)
		}
		j := a.needsApproval(b, allow, approve)
		if j > from {
			limit := callLimit{n: max(b.LimitN-from, 0), reason: b.LimitReason}
			a.record(tc, b, a.runTools(ctx, log, tc, b.Calls[from:j], allow, limit, once))
		}
		if j == len(b.Calls) {
			return nil
		}
		if verdict == nil {
			return &b.Calls[j]
		}
		if verdict.Approved {
			tc.approver = verdict.By
			a.record(tc, b, a.runTools(ctx, log, tc, b.Calls[j:j+1], allow, callLimit{n: 1}, once))
			tc.approver = ""
		} else {
			a.m.ToolCalls.WithLabelValues(tc.Channel, b.Calls[j].Name, metrics.OutcomeDenied).Inc()
			log.InfoContext(ctx, "tool call not approved", "tool", b.Calls[j].Name, "refusal", verdict.Refusal)
			if t, ok := a.tools.Get(b.Calls[j].Name); ok && t.Writes() {
				auditCall(ctx, tc, verdict.By, b.Calls[j], metrics.OutcomeDenied, 0)
			}
			a.record(tc, b, []outcome{{content: fmt.Sprintf("error: not run: %s. Tell the user; do not call it again unless they ask.", verdict.Refusal), result: metrics.OutcomeDenied}})
		}
		verdict = nil
	}
	return nil
}

// record adds outcomes to b.
func (a *Agent) record(_ *TurnContext, b *batch, outs []outcome) {
	for _, o := range outs {
		b.Done = append(b.Done, doneCall{Content: o.content, Inject: o.inject, Send: o.send, Result: o.result})
	}
}

// pause encodes the turn paused at call.
func (a *Agent) pause(res TurnResult, st pausedTurn, call *sessions.ToolCall) (TurnResult, error) {
	state, err := json.Marshal(st)
	if err != nil {
		return TurnResult{}, fmt.Errorf("agent: encode the paused turn: %w", err)
	}
	t, _ := a.tools.Get(call.Name)
	res.Paused = &Paused{Call: *call, Writes: t != nil && t.Writes(), State: state}
	return res, nil
}

// resumed decodes a paused turn.
func resumed(r *Resume) (pausedTurn, error) {
	var st pausedTurn
	if err := json.Unmarshal(r.State, &st); err != nil {
		return st, fmt.Errorf("agent: decode the paused turn: %w", err)
	}
	if st.Keep < 1 || st.Keep > len(st.Turn) || len(st.Batch.Done) >= len(st.Batch.Calls) {
		return st, fmt.Errorf("agent: the paused turn is malformed")
	}
	return st, nil
}
