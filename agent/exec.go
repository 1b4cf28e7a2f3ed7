package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/parleyhq/parley/audit"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
	openai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/otel/attribute"
)

// maxParallelTools bounds the read-only calls of one batch that run at once,
// so a model asking for fifty fetches cannot start fifty.
const maxParallelTools = 16

// unknownToolLabel is the tool label of calls to tools that do not exist:
// the name comes from the model, and metric labels must stay bounded.
const unknownToolLabel = "(unknown)"

// outcome is what one tool call produced, before wrapping.
type outcome struct {
	content string
	inject  []sessions.Message
	send    []Outgoing
	result  string // one of metrics.ToolOutcomes
}

// callLimit is how many calls of one answer may run, and what the model
// is told about the calls past that.
type callLimit struct {
	n      int
	reason string // the error result of a capped call
}

// toolCallLimit applies the per-answer and per-turn caps to an answer of
// n calls when used calls of the turn have run.
func (a *Agent) toolCallLimit(n, used int) callLimit {
	left := max(a.cfg.MaxToolCallsPerTurn-used, 0)
	switch {
	case n <= min(a.cfg.MaxToolCallsPerAnswer, left):
		return callLimit{n: n}
	case a.cfg.MaxToolCallsPerAnswer < left:
		return callLimit{n: a.cfg.MaxToolCallsPerAnswer, reason: fmt.Sprintf(
			"error: not run: one answer may call at most %d tools; call this one again in your next answer if you still need it", a.cfg.MaxToolCallsPerAnswer)}
	}
	return callLimit{n: left, reason: fmt.Sprintf(
		"error: not run: this turn may call at most %d tools and they are spent; answer the user with what you have", a.cfg.MaxToolCallsPerTurn)}
}

// normaliseCalls converts the model's tool calls to the stored form. Calls
// without an id, or repeating one, get a fresh id so every result pairs with
// exactly one call; empty arguments become "{}" (some models send nothing
// for tools without parameters).
func normaliseCalls(calls []openai.ToolCall) []sessions.ToolCall {
	out := make([]sessions.ToolCall, len(calls))
	seen := make(map[string]bool, len(calls))
	for i, c := range calls {
		id := c.ID
		if id == "" || seen[id] {
			id = "call_parley_" + strconv.FormatUint(rand.Uint64(), 36)
		}
		seen[id] = true
		args := c.Function.Arguments
		if args == "" {
			args = "{}"
		}
		out[i] = sessions.ToolCall{ID: id, Name: c.Function.Name, Arguments: args}
	}
	return out
}

// runTools executes one batch of calls and returns their outcomes in call
// order. Read-only tools run concurrently; write tools then run one at a
// time in call order, so a write never races another write and never
// changes what a read of the same batch sees. Calls that cannot run (past
// limit, unknown, not allowed, bad arguments) are answered without running
// anything.
//
// Under an active once guard each write call runs at most once per message,
// across every attempt at it (see onceGuard).
func (a *Agent) runTools(ctx context.Context, log *slog.Logger, tc *TurnContext, calls []sessions.ToolCall, allow func(string) bool, limit callLimit, once *onceGuard) []outcome {
	r := &toolRun{
		calls:     calls,
		writes:    make([]bool, len(calls)),
		out:       make([]outcome, len(calls)),
		labels:    make([]string, len(calls)),
		durations: make([]time.Duration, len(calls)),
		ran:       make([]bool, len(calls)),
	}
	reads, writes := a.sortCalls(r, calls, allow, limit)
	a.runReads(ctx, log, tc, r, reads)
	a.runWrites(ctx, log, tc, r, writes, once)
	a.account(ctx, log, tc, r)
	return r.out
}

// toolRun is what runTools learns of one batch, by call index.
type toolRun struct {
	calls     []sessions.ToolCall
	writes    []bool // the call's tool writes: the audit ledger records it
	out       []outcome
	labels    []string // the tool's name, or unknownToolLabel
	durations []time.Duration
	ran       []bool
}

// toolJob is a call of a batch that runs.
type toolJob struct {
	i    int
	tool Tool
	args json.RawMessage
}

// sortCalls answers in r the calls that cannot run and returns the others:
// the reads, which run concurrently, and the writes and sequential tools,
// which run one at a time in call order.
func (a *Agent) sortCalls(r *toolRun, calls []sessions.ToolCall, allow func(string) bool, limit callLimit) (reads, writes []toolJob) {
	for i, c := range calls {
		t, ok := a.toolNamed(c.Name, allow)
		r.labels[i] = c.Name
		if !ok {
			r.labels[i] = unknownToolLabel
		} else {
			r.writes[i] = t.Writes()
		}
		switch {
		case i >= limit.n:
			r.out[i] = outcome{content: limit.reason, result: metrics.OutcomeCapped}
		case !ok:
			r.out[i] = outcome{content: fmt.Sprintf("error: unknown tool %s; call only the tools you are offered", c.Name), result: metrics.OutcomeError}
		case allow != nil && !allow(c.Name):
			r.out[i] = outcome{content: fmt.Sprintf("error: tool %s is not available in this conversation; do not call it again, answer without it", c.Name), result: metrics.OutcomeDenied}
		case !isAvailable(t):
			r.out[i] = outcome{content: fmt.Sprintf("error: tool %s is unavailable right now (its server is down); do not call it again this turn, answer without it", c.Name), result: metrics.OutcomeUnavailable}
		case !isJSONObject([]byte(c.Arguments)):
			problem := "not a JSON object"
			if !json.Valid([]byte(c.Arguments)) {
				problem = "not valid JSON"
			}
			r.out[i] = outcome{content: fmt.Sprintf("error: invalid arguments for tool %s: %s; send a JSON object that matches the tool's parameters", c.Name, problem), result: metrics.OutcomeError}
		case t.Writes() || isSequential(t):
			writes = append(writes, toolJob{i, t, json.RawMessage(c.Arguments)})
		default:
			reads = append(reads, toolJob{i, t, json.RawMessage(c.Arguments)})
		}
	}
	return reads, writes
}

// runJob runs one call and records its outcome and duration in r.
func (a *Agent) runJob(ctx context.Context, log *slog.Logger, tc *TurnContext, r *toolRun, j toolJob) {
	start := time.Now()
	r.out[j.i] = a.call(ctx, log, tc, j.tool, j.args)
	r.durations[j.i], r.ran[j.i] = time.Since(start), true
}

// runReads runs the read-only calls, up to maxParallelTools at once.
func (a *Agent) runReads(ctx context.Context, log *slog.Logger, tc *TurnContext, r *toolRun, reads []toolJob) {
	if len(reads) == 1 {
		a.runJob(ctx, log, tc, r, reads[0])
		return
	}
	if len(reads) == 0 {
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxParallelTools)
	for _, j := range reads {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			a.runJob(ctx, log, tc, r, j)
		})
	}
	wg.Wait()
}

// runWrites runs the write and sequential calls one at a time in call
// order, a write at most once under an active once guard.
func (a *Agent) runWrites(ctx context.Context, log *slog.Logger, tc *TurnContext, r *toolRun, writes []toolJob, once *onceGuard) {
	for _, j := range writes {
		if j.tool.Writes() && once.active() {
			start := time.Now()
			var did bool
			r.out[j.i], did = a.callOnce(ctx, log, tc, once, j.tool, j.args)
			r.durations[j.i], r.ran[j.i] = time.Since(start), did
		} else {
			a.runJob(ctx, log, tc, r, j)
		}
		if inj := r.out[j.i].inject; len(inj) > 0 {
			// Later sequential calls decide on what this one injected; the
			// concurrent reads are done, so nothing else reads tc now.
			tc.History = append(tc.History[:len(tc.History):len(tc.History)], inj...)
		}
	}
}

// account counts and logs each call of the batch.
func (a *Agent) account(ctx context.Context, log *slog.Logger, tc *TurnContext, r *toolRun) {
	for i, o := range r.out {
		label := r.labels[i]
		a.m.ToolCalls.WithLabelValues(tc.Channel, label, o.result).Inc()
		if r.ran[i] {
			a.m.ToolCallDuration.WithLabelValues(label).Observe(r.durations[i].Seconds())
		}
		if o.result == metrics.OutcomeDenied {
			a.m.PolicyDenials.WithLabelValues(tc.Channel, "tool").Inc()
		}
		level := slog.LevelDebug
		if o.result != metrics.OutcomeOK {
			level = slog.LevelInfo
		}
		log.Log(ctx, level, "tool call", "tool", label, "outcome", o.result,
			"duration", r.durations[i], "injections", len(o.inject))
		if r.writes[i] {
			auditCall(ctx, tc, tc.approver, r.calls[i], o.result, r.durations[i])
		}
	}
}

// auditCall records a write call in the turn's audit ledger: run or
// refused, never its arguments (the ledger keeps their hash and a
// redacted preview).
func auditCall(ctx context.Context, tc *TurnContext, approver string, c sessions.ToolCall, result string, d time.Duration) {
	if tc.audit == nil {
		return
	}
	// The ledger logs what it cannot keep; the turn goes on either way.
	_ = tc.audit.Record(ctx, audit.Entry{Kind: audit.KindTool, Action: "call", Channel: tc.Channel, Conversation: tc.Conversation,
		User: tc.User, Tool: c.Name, Class: "write", Args: c.Arguments, Approver: approver, Outcome: result, Duration: d})
}

func isSequential(t Tool) bool {
	s, ok := t.(Sequential)
	return ok && s.Sequential()
}

// call runs one tool, turning an error or a panic into an error result the
// model can read, so that nothing a tool does can end the turn.
func (a *Agent) call(ctx context.Context, log *slog.Logger, tc *TurnContext, t Tool, args json.RawMessage) (o outcome) {
	name := t.Name()
	ctx, span := a.cfg.Tracer.Start(ctx, "tool")
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attribute.String("gen_ai.tool.name", name), attribute.String("parley.tool.outcome", o.result),
				attribute.Bool("parley.tool.writes", t.Writes()))
		}
		span.End()
	}()
	defer func() {
		if p := recover(); p != nil {
			log.ErrorContext(ctx, "tool panicked", "tool", name, "panic", p, "stack", string(debug.Stack()))
			o = outcome{content: fmt.Sprintf("error: tool %s failed with an internal error", name), result: metrics.OutcomeError}
		}
	}()
	if err := ctx.Err(); err != nil {
		return outcome{content: "error: the turn was cancelled before the tool ran", result: metrics.OutcomeError}
	}
	// Each call gets its own copy, so a tool that reassigns fields cannot
	// disturb a concurrent one.
	view := *tc
	res, err := t.Call(ctx, &view, args)
	if err != nil {
		result := metrics.OutcomeError
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// The tool's own deadline, not the turn's: counted apart so that
			// a hanging server shows up as such.
			result = metrics.OutcomeTimeout
		}
		return outcome{content: "error: " + err.Error(), result: result}
	}
	content := res.Content
	for _, f := range res.Files {
		_, line := view.KeepFile(ctx, name, f)
		content += "\n" + line
	}
	return outcome{content: content, inject: res.Inject, send: res.Send, result: metrics.OutcomeOK}
}
