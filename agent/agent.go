// Package agent runs Parley's model loop: it builds a chat completion request
// from a stable system prompt, the conversation's history and the new user
// message, lets the model call tools until it answers, and returns the new
// messages of the turn for the caller to store atomically.
//
// The package owns three rules the rest of Parley relies on:
//
//   - the system prompt holds no per-turn data, so that it is byte-identical
//     from turn to turn and prompt caches keep working;
//   - every tool result enters the history wrapped as untrusted data (see
//     WrapToolResult), and the system prompt tells the model never to follow
//     instructions found inside;
//   - tools a policy excludes are neither offered nor run, even when the
//     model calls them anyway.
//
// A failing model never fails a turn with an error: after the retries the
// user gets a short apology, and only the user's message is kept.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/parleyhq/parley/audit"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/tracing"
	openai "github.com/sashabaranov/go-openai"
)

// Defaults applied by New to zero Config fields that are not keys of the
// file (those fall back to DefaultModelSection).
const (
	DefaultBackoffBase = 500 * time.Millisecond
	DefaultBackoffMax  = 8 * time.Second
)

// Texts the agent writes itself.
const (
	// DefaultSystemPrompt is used when Config.SystemPrompt is empty.
	DefaultSystemPrompt = "You are Parley, a helpful assistant answering messages in a team chat. " +
		"Answer concisely, in the language the user writes in, using plain text or light Markdown that reads well in a chat window. " +
		"Use the tools you are offered when they help; when you cannot do something, say so plainly instead of guessing."

	// ApologyReply is the reply when the model is down: it timed out,
	// kept answering 429 or 5xx, or could not be reached. Trying again
	// later may work.
	ApologyReply = "Sorry — the language model is not answering just now (it is down, overloaded or too slow). Please try again in a few minutes."

	// MisconfiguredReply is the reply when the model refused the bot's own
	// settings (401, 403, 404, 400, …): trying again cannot help, an
	// administrator must fix the configuration.
	MisconfiguredReply = "Sorry — I can't answer: this bot is misconfigured (the language model refused its key, model name or request). Trying again won't help; please tell an administrator of this bot."

	// ContextTooLongReply is the reply when the conversation is longer
	// than the model reads and compacting it once did not help.
	ContextTooLongReply = "Sorry — this conversation has grown too long for the language model to read. Send /compact to summarise its older part, or /reset to start afresh, then ask again."

	// FilteredReply is the reply when the model provider's content
	// filter stopped the answer (finish_reason "content_filter") or
	// refused the request.
	FilteredReply = "Sorry — the model provider's content filter stopped this answer. Try rephrasing your request."

	// FilteredNote follows the part of an answer written before the
	// provider's content filter stopped it.
	FilteredNote = "\n\n[The model provider's content filter stopped this answer here.]"

	// CutNote follows a reply the model stopped at its length limit
	// (finish_reason "length"), so that nobody takes it for the whole answer.
	CutNote = "\n\n[This answer was cut off: it reached the model's length limit.]"

	// EmptyReply stands in for a final answer without text.
	EmptyReply = "Sorry — I don't have an answer to that."

	// budgetNote asks for an answer once the tool budget is spent. It is a
	// user-role message at the end of the last request, never stored, so
	// that the system prompt stays untouched and servers whose templates
	// only accept a leading system message still take it.
	budgetNote = "[Parley] The tool budget for this turn is spent; no more tools can be called. " +
		"Answer the user now with what you have, and say what is still missing if anything is."
)

// Config tunes an Agent. Zero fields take the file's defaults
// (DefaultModelSection) or the ones above; MaxRetries zero means no retries,
// as in the file.
type Config struct {
	// Model is the model name sent with every request. Required.
	Model string
	// Vision marks Model as accepting images.
	Vision bool
	// Fallbacks are the keys of the Models tried after Model when it
	// fails, in order: the whole chain (see Endpoint.Fallbacks).
	Fallbacks []string
	// Models are further models, for Fallbacks and for turns that name
	// one (TurnRequest.Model). Model is config.DefaultModelKey among them.
	Models []ModelConfig
	// MaxToolIterations bounds the model requests that may run tools in
	// one turn; after that one last request offers no tools.
	MaxToolIterations int
	// Timeout bounds each model request attempt.
	Timeout time.Duration
	// StreamIdleTimeout bounds the silence between two chunks of a
	// streamed answer, once it has begun (at most Timeout; zero:
	// DefaultStreamIdleTimeout).
	StreamIdleTimeout time.Duration
	// TurnTimeout bounds a whole turn: every model request with its
	// retries and backoffs, and the tool calls between them. When it
	// passes, the user gets ApologyReply.
	TurnTimeout time.Duration
	// MaxRetries is how many times a failed request is sent again after
	// the first attempt; 0 (or less) never retries. The file's default is
	// DefaultModelSection's.
	MaxRetries int
	// MaxTokens caps the completion tokens of each request (sent as
	// max_completion_tokens).
	MaxTokens int
	// MaxToolCallsPerAnswer caps the tool calls run for one model
	// answer, MaxToolCallsPerTurn those of the whole turn. A call past a
	// cap is not run: its result tells the model why, and once the turn's
	// calls are spent the next request offers no tools.
	MaxToolCallsPerAnswer int
	MaxToolCallsPerTurn   int
	// SystemPrompt replaces DefaultSystemPrompt.
	SystemPrompt string
	// BackoffBase and BackoffMax shape the exponential backoff between
	// retries; a Retry-After header from the server takes precedence.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Sleep waits between retries; nil waits on a timer. Tests replace it to
	// record the chosen backoff without waiting. It must return ctx.Err()
	// when ctx ends first.
	Sleep func(ctx context.Context, d time.Duration) error
	// Tracer traces the history's preparation, each model request and
	// each tool call; the zero value traces nothing.
	Tracer tracing.Tracer
	// ToolBudget bounds the tool schemas a request carries
	// (tools.schema_budget, tools.pinned); nil: DefaultToolsSection.
	ToolBudget *ToolsSection
}

func (c Config) withDefaults() Config {
	file := DefaultModelSection()
	if c.ToolBudget == nil {
		c.ToolBudget = DefaultToolsSection()
	}
	if c.MaxToolIterations <= 0 {
		c.MaxToolIterations = file.MaxToolIterations
	}
	if c.Timeout <= 0 {
		c.Timeout = file.Timeout
	}
	if c.TurnTimeout <= 0 {
		c.TurnTimeout = file.TurnTimeout
	}
	if c.StreamIdleTimeout <= 0 {
		c.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	c.StreamIdleTimeout = min(c.StreamIdleTimeout, c.Timeout)
	c.MaxRetries = max(c.MaxRetries, 0)
	if c.MaxTokens <= 0 {
		c.MaxTokens = file.MaxTokens
	}
	if c.MaxToolCallsPerAnswer <= 0 {
		c.MaxToolCallsPerAnswer = file.MaxToolCallsPerAnswer
	}
	if c.MaxToolCallsPerTurn <= 0 {
		c.MaxToolCallsPerTurn = file.MaxToolCallsPerTurn
	}
	if c.SystemPrompt == "" {
		c.SystemPrompt = DefaultSystemPrompt
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.BackoffMax < c.BackoffBase {
		c.BackoffMax = c.BackoffBase
	}
	return c
}

// Agent answers turns. It is safe for concurrent use by many conversations.
type Agent struct {
	cfg   Config
	tools *Registry
	m     *metrics.Metrics
	log   *slog.Logger
	// primary is Config.Model, models every model by key, primary
	// included (see endpoint).
	primary *endpoint
	models  map[string]*endpoint
	// systems is the last system message sent for each persona, encoded,
	// by Persona.Name (see systemMessage).
	systems sync.Map

	toolsMu sync.Mutex
	encoded map[string]encodedTool // by tool name
}

// New returns an Agent. tools may be nil (no tools); m nil counts into a
// private registry; log nil discards.
func New(cfg Config, client *Client, tools *Registry, m *metrics.Metrics, log *slog.Logger) *Agent {
	cfg = cfg.withDefaults()
	if tools == nil {
		tools = NewRegistry()
	}
	if m == nil {
		m = metrics.New()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "agent")
	a := &Agent{
		cfg:    cfg,
		tools:  tools,
		m:      m,
		log:    log,
		models: map[string]*endpoint{},
	}
	fallbacks := map[string][]string{config.DefaultModelKey: cfg.Fallbacks}
	for _, mc := range cfg.Models {
		if mc.Key == config.DefaultModelKey || mc.Client == nil {
			continue
		}
		a.addEndpoint(mc.Key, mc.Name, mc.Client, mc.Timeout, mc.MaxRetries, mc.Vision)
		fallbacks[mc.Key] = mc.Fallbacks
	}
	a.primary = a.addEndpoint(config.DefaultModelKey, cfg.Model, client, cfg.Timeout, cfg.MaxRetries, cfg.Vision)
	a.linkChains(fallbacks)
	return a
}

// SystemPrompt returns the system prompt of a turn without a persona
// whose TurnRequest has SystemExtra extra (see SystemPromptFor).
func (a *Agent) SystemPrompt(extra string) string {
	return a.SystemPromptFor(Persona{}, extra)
}

// SystemPromptFor returns the system prompt of a turn with persona p
// whose TurnRequest has SystemExtra extra. It depends on nothing else (no
// clock, no map order, no turn), so it is byte-identical for every turn,
// of every conversation and on every replica, that shares p and extra.
func (a *Agent) SystemPromptFor(p Persona, extra string) string {
	return buildSystemPrompt(a.cfg.SystemPrompt, p, extra)
}

// TurnRequest is one user message to answer.
type TurnRequest struct {
	Channel      string
	Workspace    string
	Chat         string
	Conversation string
	User         string
	// History is the stored history, oldest first, as the store keeps it
	// (see sessions.HistoryOf to build one). Run sends it sanitised (see
	// Sanitize) without decoding it, and never modifies it.
	History sessions.History
	// UserText is the new user message.
	UserText string
	// SystemExtra is appended to the system prompt (the skill index). Keep
	// it free of per-turn data.
	SystemExtra string
	// Persona is the profile's part of the system prompt; the zero value
	// is Config.SystemPrompt alone.
	Persona Persona
	// Allow reports whether the conversation may use a tool; nil allows
	// every registered tool.
	Allow func(toolName string) bool
	// Skills is what this turn sees of the skills, fixed for the whole turn
	// so that a reload applies from the next one. Nil: no skills.
	Skills *SkillSet
	// Preface holds messages placed before the user message and stored
	// with the turn: the injection of a manual /skill:NAME.
	Preface []sessions.Message
	// Item identifies the inbox item (the queued message) the turn
	// answers, the same on every attempt at it. With Calls it makes each
	// write-tool call run at most once per message.
	Item string
	// Calls records write-tool calls (nil: none are recorded, and a
	// message answered twice makes its writes twice).
	Calls CallLedger
	// Audit records every write-tool call of the turn, run or refused,
	// with who asked, who approved and the outcome (nil: none).
	Audit audit.Recorder
	// Approve reports whether a call of a tool, which writes if writes is
	// true, waits for a person's approval: the turn then pauses there
	// (TurnResult.Paused). Nil: no call does.
	Approve func(tool string, writes bool) bool
	// Resume continues a paused turn instead of starting one; UserText,
	// Preface and History's new messages are then the paused turn's.
	Resume *Resume
	// Events, when set, is told what the turn does while it runs: the
	// answer's text as the model writes it, the tools called, the skills
	// loaded (see Event). It is called on the turn's goroutine, one event
	// at a time, and must return quickly: a slow listener slows the turn.
	Events func(Event)
	// Model is the key of the model to ask first (the policy's model);
	// empty: Config.Model. Its fallbacks follow it.
	Model string
	// Attachments are the references stored with the user message (the
	// images and files UserText already describes).
	Attachments []sessions.Attachment
	// Images are URLs (data URLs) of the user message's images, sent as
	// image_url parts to a model with vision; a model without gets
	// NoVisionNote for each. They are never stored. Ignored unless
	// Attachments is set.
	Images []string
	// HistoryImages are images sent again with stored user messages, by
	// their entry in History; only to a model with vision.
	HistoryImages map[int][]string
	// Compact, when set, compacts the stored history and returns the
	// new one (false: nothing was compacted). A turn the model refuses
	// as longer than its context calls it once and asks again; without
	// it, or when that fails too, the user is told to /compact or
	// /reset (ContextTooLongReply).
	Compact func(ctx context.Context) (sessions.History, bool)
	// Files keeps the files the turn's tools make (nil: none are kept,
	// and each is only described).
	Files FileKeeper
}

// Usage sums the tokens of every model request of a turn.
type Usage struct {
	Prompt     int
	Completion int
	Cached     int
	// Reasoning are the completion tokens the model spent reasoning,
	// where the provider reports them (completion_tokens_details); they
	// are counted in Completion too.
	Reasoning int
}

// TurnResult is the outcome of Run.
type TurnResult struct {
	// Reply is the text for the user.
	Reply string
	// Messages are the new messages of the turn, in order, starting with
	// the user message; the caller appends them to the history atomically.
	// On failure they hold only the user message.
	Messages []sessions.Message
	Usage    Usage
	// Model is the key of the model that answered (or, on failure, the
	// last one asked).
	Model string
	// Iterations counts the model answers whose tool calls were executed.
	Iterations int
	// Failed reports that the model could not answer; Failure says why
	// (Reply is then ApologyReply, MisconfiguredReply, ContextTooLongReply
	// or FilteredReply).
	Failed  bool
	Failure Failure
	// Cut reports that the model stopped the answer at its length limit;
	// Reply then ends with CutNote.
	Cut bool
	// Paused is set when the turn waits for approval of a call: there is
	// no Reply and no Messages yet; Run with TurnRequest.Resume continues it.
	Paused *Paused
	// Files are the kept files send_file asked to send with the answer,
	// in call order, each once.
	Files []Outgoing
}

// Failure classifies why a turn could not be answered, for the apology and
// the log.
type Failure int

const (
	// NoFailure: the turn was answered.
	NoFailure Failure = iota
	// ModelDown: timeouts, the turn deadline, 429 or 5xx after the
	// retries, a connection that failed or an answer that did not decode.
	// Trying again later may work.
	ModelDown
	// Misconfigured: the model refused the request as such (401, 403,
	// 404, 400 and other client errors). Only an administrator can fix it.
	Misconfigured
	// ContextTooLong: the conversation is longer than the model reads,
	// even after compacting it once. /compact or /reset fixes it.
	ContextTooLong
	// Filtered: the provider's content policy refused the request.
	Filtered
)

func (f Failure) String() string {
	switch f {
	case ModelDown:
		return "model_down"
	case Misconfigured:
		return "misconfigured"
	case ContextTooLong:
		return "context_too_long"
	case Filtered:
		return "filtered"
	}
	return "none"
}

// Classify tells a model failure that trying again may fix from one only
// an administrator can.
func Classify(err error) Failure {
	if err == nil {
		return NoFailure
	}
	if contextTooLong(err) {
		return ContextTooLong
	}
	if refusedByPolicy(err) {
		return Filtered
	}
	if neverSucceeds(err) {
		return Misconfigured
	}
	if code, ok := statusOf(err); ok && code >= 400 && code < 500 && !retryableStatus(code) {
		return Misconfigured
	}
	if errors.Is(err, ErrNotAnAPI) {
		return Misconfigured
	}
	return ModelDown
}

// ErrEmptyMessage is returned by Run for a TurnRequest without UserText.
var ErrEmptyMessage = errors.New("agent: empty user message")

// errTurnDeadline is the cause of a turn's context when TurnTimeout passed.
var errTurnDeadline = errors.New("agent: the turn deadline (model.turn_timeout) passed")

// failed ends a turn the model could not answer: the apology its failure
// calls for, logged as what it is, and only the user's message kept.
func (a *Agent) failed(ctx context.Context, log *slog.Logger, res TurnResult, err error, start time.Time, keep []sessions.Message) TurnResult {
	if errors.Is(context.Cause(ctx), errTurnDeadline) && !errors.Is(err, errTurnDeadline) {
		err = fmt.Errorf("%w: %w", errTurnDeadline, err)
	}
	res.Failed = true
	res.Failure = Classify(err)
	res.Reply = ApologyReply
	msg := "the model is down; apologising (retry later)"
	switch res.Failure {
	case Misconfigured:
		res.Reply = MisconfiguredReply
		msg = "the model refused the bot's configuration (check model.api_key, model.name and model.base_url); apologising (tell an admin)"
	case ContextTooLong:
		res.Reply = ContextTooLongReply
		msg = "the conversation is longer than the model's context; asking the user to /compact or /reset"
	case Filtered:
		res.Reply = FilteredReply
		msg = "the provider's content filter refused the request; telling the user"
	}
	log.ErrorContext(ctx, msg, "failure", res.Failure.String(), "err", err,
		"iterations", res.Iterations, "duration", time.Since(start))
	res.Messages = keep
	return res
}

// injection turns a tool's Inject message into the stored form: always a
// user message, Kind injection unless the tool named another Kind, without
// tool fields that would break the history's call/result pairing.
func injection(m sessions.Message) (sessions.Message, bool) {
	if m.Content == "" {
		return sessions.Message{}, false
	}
	kind := m.Kind
	if kind == "" {
		kind = sessions.KindInjection
	}
	return sessions.Message{Role: openai.ChatMessageRoleUser, Content: m.Content, Name: m.Name, Kind: kind}, true
}
