package agent

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley/internal/pausable"
	"github.com/parleyhq/parley/sessions"
	openai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/otel/attribute"
)

// Run answers one user message. It returns an error only when ctx ends
// (ctx.Err()), UserText is empty (ErrEmptyMessage) or the Agent has no
// client; a model that cannot be reached yields a TurnResult with Failed set
// and a nil error.
func (a *Agent) Run(ctx context.Context, req TurnRequest) (TurnResult, error) {
	if err := ctx.Err(); err != nil {
		return TurnResult{}, err
	}
	// The turn deadline is told from the caller's cancellation by ctx's
	// parent: only the caller's ending is an error.
	parent := ctx
	// Its clock stops while a tool waits for a person's answer (see
	// pausable): their time is not the model's.
	ctx, cancel := pausable.WithTimeout(ctx, a.cfg.TurnTimeout, errTurnDeadline)
	defer cancel()
	if a.primary.client == nil {
		return TurnResult{}, errors.New("agent: no model client")
	}
	if strings.TrimSpace(req.UserText) == "" && req.Resume == nil {
		// The API rejects an empty user message; failing here names the
		// real problem instead of apologising for the model.
		return TurnResult{}, ErrEmptyMessage
	}
	t, err := a.newTurn(ctx, parent, req)
	if err != nil {
		return TurnResult{}, err
	}
	if t.verdict != nil && t.verdict.Stop {
		return TurnResult{Messages: t.turn[:t.keep]}, nil
	}
	for {
		if t.pending != nil {
			if res, end, err := t.runPending(ctx); end {
				return res, err
			}
		}
		if res, end, err := t.askModel(ctx); end {
			return res, err
		}
	}
}

// turnRun is one Run's state across its loop: the model's answers, the
// tool calls they make and the messages both add to the turn.
type turnRun struct {
	a      *Agent
	req    TurnRequest
	parent context.Context // the caller's context, without the turn deadline
	log    *slog.Logger
	start  time.Time

	hist     *plan
	injected map[string]bool // the skills the stored history already loaded
	media    turnMedia
	system   []byte

	// The stored history is sent as it is stored; turn holds this turn's
	// messages, returned at the end. The tools see the decoded history
	// (seen) followed by turn, built on the first batch of tool calls only.
	turn    []sessions.Message
	keep    int                // kept when the model fails: the preface and the user message
	seen    []sessions.Message // the decoded history, once tools run
	pending *batch             // tool calls of the model's last answer, to run
	verdict *Verdict           // the decision on the call a resumed turn paused at

	tc    TurnContext
	res   TurnResult
	ev    *emitter
	chain []*endpoint
	pos   int
	once  *onceGuard
	calls int // tool calls of this turn that were not capped

	compacted bool // the history was compacted for a context too long

	// storedJoined is the tools the stored history called or found (see
	// offerTools), read once a turn goes over the schema budget.
	storedJoined *joinedNames

	sends []Outgoing // the files to send with the answer, so far
}

// newTurn sets a turn up from req, or from the paused turn req resumes.
func (a *Agent) newTurn(ctx, parent context.Context, req TurnRequest) (*turnRun, error) {
	t := &turnRun{
		a:      a,
		req:    req,
		parent: parent,
		start:  time.Now(),
		media:  turnMedia{images: req.Images, history: req.HistoryImages},
	}
	_, span := a.cfg.Tracer.Start(ctx, "history")
	t.hist = newPlan(req.History)
	t.injected = t.hist.injectedSkills()
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("parley.history.messages", req.History.Len()), attribute.Int("parley.history.sent", len(t.hist.steps)))
	}
	span.End()
	user := sessions.Message{Role: openai.ChatMessageRoleUser, Content: req.UserText, Attachments: req.Attachments}
	t.turn = make([]sessions.Message, 0, len(req.Preface)+3)
	t.turn = append(t.turn, req.Preface...)
	t.turn = append(t.turn, user)
	t.keep = len(t.turn)
	var paused pausedTurn
	if req.Resume != nil {
		var err error
		if paused, err = resumed(req.Resume); err != nil {
			return nil, err
		}
		t.turn, t.keep, t.pending, t.verdict = paused.Turn, paused.Keep, &paused.Batch, &req.Resume.Verdict
		t.sends = paused.Sends
		if t.verdict.Stop {
			return t, nil
		}
	}
	t.tc = TurnContext{
		Channel:      req.Channel,
		Workspace:    req.Workspace,
		Chat:         req.Chat,
		Conversation: req.Conversation,
		User:         req.User,
		Skills:       req.Skills,
		audit:        req.Audit,
		files:        &turnFiles{keeper: req.Files, kept: paused.FilesKept},
	}
	t.log = withAttrs(a.log, slog.String("channel", req.Channel), slog.String("conversation", sessions.ShownKey(req.Conversation)))
	t.system = a.systemMessage(req.Persona, req.SystemExtra)
	t.ev = &emitter{fn: req.Events}
	t.chain = a.chainFor(ctx, req.Model)
	t.once = &onceGuard{ledger: req.Calls, conv: req.Conversation, item: req.Item, next: paused.OnceNext}
	t.calls = paused.Calls
	t.res.Iterations = paused.Iterations
	return t, nil
}

// runPending runs the tool calls of the model's last answer and adds their
// results to the turn. It ends the turn when a call waits for approval or
// a context ended meanwhile.
func (t *turnRun) runPending(ctx context.Context) (TurnResult, bool, error) {
	if t.seen == nil {
		t.seen = t.hist.messages()
	}
	t.tc.History = append(t.seen[:len(t.seen):len(t.seen)], t.turn...)
	allow := withFindTools(narrowed(t.req.Allow, t.req.Skills, t.injected, t.turn))
	if call := t.a.runBatch(ctx, t.log, &t.tc, t.pending, allow, t.req.Approve, t.verdict, t.once); call != nil {
		res, err := t.a.pause(t.res, pausedTurn{Turn: t.turn, Keep: t.keep, Batch: *t.pending, Calls: t.calls, Iterations: t.res.Iterations, OnceNext: t.once.next,
			Sends: t.batchSends(t.pending), FilesKept: t.tc.files.count()}, call)
		return res, true, err
	}
	t.verdict = nil
	t.sends = t.batchSends(t.pending)
	t.addResults(t.pending)
	t.pending = nil
	t.res.Iterations++
	if err := t.parent.Err(); err != nil {
		return TurnResult{}, true, err
	}
	if ctx.Err() != nil {
		return t.a.failed(ctx, t.log, t.res, context.Cause(ctx), t.start, t.turn[:t.keep:t.keep]), true, nil
	}
	return TurnResult{}, false, nil
}

// batchSends is the turn's files to send with those b's calls asked for,
// each file once (a model that asks twice sends one).
func (t *turnRun) batchSends(b *batch) []Outgoing {
	out := t.sends[:len(t.sends):len(t.sends)]
	for _, d := range b.Done {
		for _, o := range d.Send {
			if !slices.ContainsFunc(out, func(x Outgoing) bool { return x.ID == o.ID }) {
				out = append(out, o)
			}
		}
	}
	return out
}

// addResults appends a finished batch's results to the turn, each after
// the other, and then the messages its calls injected.
func (t *turnRun) addResults(b *batch) {
	for i, o := range b.Done {
		t.turn = append(t.turn, sessions.Message{
			Role:       openai.ChatMessageRoleTool,
			Content:    WrapToolResult(b.Calls[i].Name, o.Content),
			Name:       b.Calls[i].Name,
			ToolCallID: b.Calls[i].ID,
		})
	}
	for _, o := range b.Done {
		for _, inj := range o.Inject {
			if m, ok := injection(inj); ok {
				t.turn = append(t.turn, m)
			}
		}
		announceSkills(t.ev, o.Inject)
	}
}

// askModel asks the model once: an answer ends the turn, tool calls are
// left pending for the next round, and a model that failed ends the turn
// with an apology.
func (t *turnRun) askModel(ctx context.Context) (TurnResult, bool, error) {
	a := t.a
	last := t.res.Iterations >= a.cfg.MaxToolIterations || t.calls >= a.cfg.MaxToolCallsPerTurn
	// Recomputed each iteration: a skill loaded by the previous batch
	// may narrow the tools with its allowed-tools.
	allow := narrowed(t.req.Allow, t.req.Skills, t.injected, t.turn)
	var tools [][]byte
	if !last {
		tools = a.offerTools(allow, t.joined).tools
	}
	answer, finish, err := a.ask(ctx, t.log, t.req.Channel, t.chain, &t.pos, func(ep *endpoint) *[]byte {
		return a.turnRequest(ep, t.system, t.hist, t.turn, last, tools, t.media)
	}, &t.res.Usage, t.ev)
	t.res.Model = t.chain[t.pos].key
	if err != nil {
		if ctxErr := t.parent.Err(); ctxErr != nil {
			return TurnResult{}, true, ctxErr
		}
		if Classify(err) == ContextTooLong && t.compactOnce(ctx, err) {
			return TurnResult{}, false, nil
		}
		return a.failed(ctx, t.log, t.res, err, t.start, t.turn[:t.keep:t.keep]), true, nil
	}
	// A model that calls tools after being offered none (the budget is
	// spent) gets its text taken as the answer; the calls are dropped
	// rather than stored without results.
	if len(answer.ToolCalls) == 0 || last {
		return t.answered(ctx, answer.Content, finish), true, nil
	}
	t.callTools(answer)
	return TurnResult{}, false, nil
}

// answered ends the turn with the model's text as the reply.
func (t *turnRun) answered(ctx context.Context, reply string, finish openai.FinishReason) TurnResult {
	res := &t.res
	filtered := finish == openai.FinishReasonContentFilter
	switch {
	case filtered && strings.TrimSpace(reply) == "":
		reply = FilteredReply
	case strings.TrimSpace(reply) == "":
		reply = EmptyReply
	}
	answer := sessions.Message{Role: openai.ChatMessageRoleAssistant, Content: reply}
	if res.Usage != (Usage{}) {
		answer.Usage = &sessions.Usage{Model: res.Model, Prompt: res.Usage.Prompt, Completion: res.Usage.Completion, Cached: res.Usage.Cached}
	}
	t.turn = append(t.turn, answer)
	res.Reply = reply
	if finish == openai.FinishReasonLength {
		// Stored as the model wrote it; only the user is told.
		res.Cut = true
		res.Reply += CutNote
		t.log.WarnContext(ctx, "the answer was cut at the model's length limit", "completion_tokens", res.Usage.Completion, "max_tokens", t.a.cfg.MaxTokens)
	}
	if filtered {
		if res.Reply != FilteredReply {
			res.Reply += FilteredNote
		}
		t.log.WarnContext(ctx, "the model provider's content filter stopped the answer", "model", res.Model, "completion_tokens", res.Usage.Completion)
	}
	res.Messages = t.turn
	res.Files = t.sends
	t.log.DebugContext(ctx, "turn answered", "model", res.Model, "iterations", res.Iterations,
		"prompt_tokens", res.Usage.Prompt, "completion_tokens", res.Usage.Completion,
		"cached_tokens", res.Usage.Cached, "duration", time.Since(t.start))
	return *res
}

// callTools adds the model's tool calls to the turn and leaves them
// pending, capped at what the turn's budget has left.
func (t *turnRun) callTools(answer openai.ChatCompletionMessage) {
	// Text that came with tool calls is not the answer: it leaves the
	// screen, and the calls take its place.
	t.ev.reset()
	call := sessions.Message{
		Role:      openai.ChatMessageRoleAssistant,
		Content:   answer.Content,
		ToolCalls: normaliseCalls(answer.ToolCalls),
	}
	if answer.ReasoningContent != "" {
		// Sent back with the calls, to this model only, in this turn's
		// requests and every later one (DeepSeek's thinking mode asks
		// for it: "for turns that do perform tool calls, the
		// reasoning_content must be fully passed back").
		call.ReasoningContent, call.ReasoningModel = answer.ReasoningContent, t.res.Model
	}
	t.turn = append(t.turn, call)
	limit := t.a.toolCallLimit(len(call.ToolCalls), t.calls)
	t.a.announceCalls(t.ev, call.ToolCalls[:limit.n])
	t.calls += limit.n
	// Run at the top of the loop, where a resumed turn finishes the
	// batch it paused in.
	t.pending = &batch{Calls: call.ToolCalls, LimitN: limit.n, LimitReason: limit.reason}
}

// compactOnce compacts the stored history once for a request the model
// refused as longer than its context, so that the request can be sent
// again; false when it was already compacted or could not be.
func (t *turnRun) compactOnce(ctx context.Context, cause error) bool {
	if t.compacted || t.req.Compact == nil {
		return false
	}
	t.compacted = true
	h, ok := t.req.Compact(ctx)
	if !ok {
		return false
	}
	t.log.InfoContext(ctx, "the conversation was longer than the model's context; compacted it and asking again", "err", cause)
	t.hist = newPlan(h)
	t.injected = t.hist.injectedSkills()
	t.seen = nil
	t.storedJoined = nil
	// The images of stored messages were placed by their entries,
	// which compaction renumbered.
	t.media.history = nil
	return true
}

// joined lists the tools that joined the conversation, stored history
// first, in the order they joined (see offerTools).
func (t *turnRun) joined() []string {
	if t.storedJoined == nil {
		t.storedJoined = &joinedNames{}
		t.storedJoined.fromPlan(t.hist)
	}
	j := t.storedJoined.clone()
	j.fromTurn(t.turn)
	return j.names
}
