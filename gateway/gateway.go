// Package gateway routes messages from every channel to the agent: it drops
// duplicates, queues each message on its conversation in Redis, runs the
// turns of one conversation one at a time and in arrival order across all
// replicas, runs different conversations in parallel on a bounded pool, and
// sends the reply back through the channel the message came from.
//
// Ordering across replicas comes from the conversation inbox in Redis: a
// message is accepted by appending it there (with its de-dup record, in one
// script), and a turn claims the conversation lock together with the oldest
// message and the history (one script), then writes the turn, removes the
// message and releases the lock (one script). A replica that dies mid-turn
// leaves the message at the head; the next holder answers it.
//
// A worker serves one turn of a conversation and then gives it back: a
// conversation with more queued goes to the back of the line, so that a
// busy conversation cannot hold a worker while the others wait (see
// scheduler.go).
//
// The gateway keeps the ordering (the inbox, the scheduler, the locks and
// the turn's commit) and calls out for the rest: chat commands are the
// registry of gateway/commands, replies go by the route gateway/delivery
// chooses from the channel's capabilities (channels.CapabilitiesOf, worked
// out once at Register), and quotas and usage are counted through the
// accounting interface (quota.go).
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/parleyhq/parley/agent"
	agentfiles "github.com/parleyhq/parley/agent/files"
	"github.com/parleyhq/parley/audit"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway/approval"
	"github.com/parleyhq/parley/gateway/commands"
	roomctx "github.com/parleyhq/parley/gateway/context"
	"github.com/parleyhq/parley/gateway/delivery"
	"github.com/parleyhq/parley/gateway/media"
	"github.com/parleyhq/parley/gateway/outbox"
	"github.com/parleyhq/parley/gateway/quota"
	"github.com/parleyhq/parley/gateway/usage"
	"github.com/parleyhq/parley/internal/logthrottle"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/retry"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/tracing"
	"github.com/parleyhq/parley/triggers"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// ErrClosed is returned by Submit once Shutdown has begun.
var ErrClosed = errors.New("gateway: shutting down")

// Responder runs turns and compacts histories; *agent.Agent implements it.
type Responder interface {
	Run(ctx context.Context, req agent.TurnRequest) (agent.TurnResult, error)
	Compact(ctx context.Context, channel string, history []sessions.Message, keep int) (agent.Compaction, bool, error)
}

// Config sizes the gateway and names the parts it consults per turn. Zero
// fields take the defaults.
type Config struct {
	Workers         int // conversations served at once on this replica
	QueueLimit      int // messages waiting in one conversation
	MaxMessageChars int // longer user messages are refused
	// RetryMin and RetryMax bound the backoff before a conversation is
	// tried again after Redis failed (0: DefaultRetryMin, DefaultRetryMax).
	RetryMin, RetryMax time.Duration
	// SweepEvery is how often the gateway looks for conversations whose
	// queued messages nobody is serving (their replica died); 0 =
	// DefaultSweepEvery.
	SweepEvery time.Duration

	CompactTokens int // compact a history estimated above this many tokens
	KeepRounds    int // rounds kept verbatim by compaction
	SkillBudget   int // bytes of skill injections one history may hold

	// Policy decides tools, skills, access and admins per conversation;
	// nil allows everything and makes nobody an admin.
	Policy *policy.Resolver
	// Tools is the agent's registry, consulted for whether a tool writes.
	Tools *agent.Registry
	// Skills is nil on a bot without skills.
	Skills *Skills
	// Schedules are the chats' own schedules (/schedule); nil answers
	// that there are none.
	Schedules commands.Schedules
	// Quotas counts messages and tokens against the policy's limits and
	// budget, over every replica sharing its Redis; nil enforces none.
	Quotas *quota.Quotas
	// Usage records what each turn spent, by user, chat, channel and
	// model, for `parley usage`; nil records nothing.
	Usage *usage.Store
	// Outbox delivers the replies of channels that post part by part
	// (channels.Poster): a failed post is tried again by whichever replica
	// is alive, and no part is posted twice. nil sends every reply once,
	// through the channel's Send.
	Outbox *outbox.Outbox
	// Approvals keeps the calls waiting for approval (tools.approve,
	// tools.approve_writes); nil: no call waits, whatever the policy says.
	Approvals *approval.Store
	// Audit records the write-tool calls and the approvals asked for and
	// decided (nil: none are).
	Audit audit.Recorder
	// Tracer traces each message (receive, queue, turn and its steps);
	// the zero value traces nothing.
	Tracer tracing.Tracer
	// Media reads the images and files of messages within the media:
	// limits; nil: the defaults.
	Media *media.Preparer
	// TypingDelay is how long a turn runs before the channel's typing
	// indicator is shown (channels.TypingAfter): a faster answer shows
	// none. 0 shows it as the turn starts.
	TypingDelay time.Duration
	// Threads keeps the thread of each alert group (triggers.Work's
	// Group); nil answers a group's work in its chat, without a thread.
	Threads *triggers.Threads
	// Files keeps the files a turn's tools make and reads them back to
	// send them (send_file); nil keeps none, and send_file is not offered.
	Files *agentfiles.Keeper
	// WorkMaxAge is how long the root post of an alert group's thread is
	// tried before the work is dropped (0: config.DefaultOutboxMaxAge).
	WorkMaxAge time.Duration
}

// Gateway is the router. Create it with New, register channels, then Start.
type Gateway struct {
	cfg     Config
	store   sessions.Store
	agent   Responder
	metrics *metrics.Metrics
	log     *slog.Logger

	sched *scheduler
	// mu guards channels and stopOutbox.
	mu sync.Mutex
	// channels holds each registered adapter's capabilities, worked out
	// once at Register.
	channels map[string]*channels.Capabilities
	// redisDown is set when a Redis call of a turn failed, and cleared by
	// the sweep that runs as soon as Redis answers again.
	redisDown chan struct{}
	apologies apologies // messages whose user was told their turn is delayed
	// refusals keeps refused messages (access, quotas) from flooding the
	// log: anyone can write to a public bot as often as they like.
	refusals *logthrottle.Throttle
	// redisRetry retries writing a turn while the lock is certainly ours:
	// the lock, not a count, bounds the attempts.
	redisRetry *retry.Retrier

	out       *delivery.Deliverer // how replies reach the channels
	acct      accounting          // quotas and the usage report
	commands  *commands.Registry  // chat commands answered in turn
	decider   *commands.Decider   // approval commands decided on arrival
	approvals *approvals          // turns paused for approval
	skills    *skillSets          // what a turn sees of skills and tools
	compactor *compactor
	att       *attachments
	room      *roomctx.Reader // the room of turns; nil when the store keeps none

	runCtx    context.Context // parent of every turn; cancelled at the shutdown deadline
	cancelRun context.CancelFunc
	stop      chan struct{} // closed when Shutdown begins
	// stopOutbox ends the outbox loop when Shutdown begins; an item it
	// was trying goes back to the outbox for another replica.
	stopOutbox context.CancelFunc
	wg         sync.WaitGroup
}

// Defaults of the Config fields that are not keys of the file (those
// fall back to the sections' defaults: DefaultSection,
// sessions.DefaultConfig).
const (
	DefaultRetryMin   = 50 * time.Millisecond
	DefaultRetryMax   = time.Second
	DefaultSweepEvery = 30 * time.Second
)

func (c Config) withDefaults() Config {
	gw, s := DefaultSection(), sessions.DefaultConfig()
	if c.Workers <= 0 {
		c.Workers = gw.Workers
	}
	if c.QueueLimit <= 0 {
		c.QueueLimit = s.QueueLimit
	}
	if c.MaxMessageChars <= 0 {
		c.MaxMessageChars = s.MaxMessageChars
	}
	if c.RetryMin <= 0 {
		c.RetryMin = DefaultRetryMin
	}
	if c.RetryMax < c.RetryMin {
		c.RetryMax = max(DefaultRetryMax, c.RetryMin)
	}
	if c.SweepEvery <= 0 {
		c.SweepEvery = DefaultSweepEvery
	}
	if c.CompactTokens <= 0 {
		c.CompactTokens = s.CompactTokens
	}
	if c.KeepRounds <= 0 {
		c.KeepRounds = s.KeepRounds
	}
	if c.SkillBudget <= 0 {
		c.SkillBudget = config.DefaultSkillBodyBudget
	}
	if c.Policy == nil {
		c.Policy = policy.New(policy.Config{})
	}
	return c
}

// New returns a gateway; it runs nothing until Start. m nil counts into a
// private registry; log nil discards.
func New(cfg Config, store sessions.Store, a Responder, m *metrics.Metrics, log *slog.Logger) *Gateway {
	cfg = cfg.withDefaults()
	if cfg.Media == nil {
		cfg.Media = media.New(nil)
	}
	if m == nil {
		m = metrics.New()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	g := &Gateway{
		cfg: cfg, store: store, agent: a, metrics: m, log: log.With("component", "gateway"),
		sched:     newScheduler(cfg.RetryMin, cfg.RetryMax),
		channels:  map[string]*channels.Capabilities{},
		redisDown: make(chan struct{}, 1),
		refusals:  logthrottle.New(logthrottle.DefaultEvery, nil),
		runCtx:    runCtx, cancelRun: cancel,
		stop: make(chan struct{}),
	}
	g.redisRetry = retry.New("redis", retry.Policy{Attempts: math.MaxInt32, MinWait: cfg.RetryMin, MaxWait: cfg.RetryMax}, m, g.log)
	// The parts a turn calls for delivery, accounting, skills,
	// attachments, approvals and commands.
	dcfg := delivery.Config{Outbox: cfg.Outbox, Replies: store, FirstShow: cfg.TypingDelay, Tracer: cfg.Tracer, Metrics: m, Log: g.log}
	if cfg.Files != nil {
		dcfg.Files = cfg.Files
	}
	g.out = delivery.New(dcfg)
	g.acct = &ledger{quotas: cfg.Quotas, usage: cfg.Usage, metrics: m, log: g.log, refusals: g.refusals}
	g.skills = &skillSets{skills: cfg.Skills, tools: cfg.Tools, log: g.log, budget: cfg.SkillBudget}
	g.compactor = &compactor{agent: g.agent, store: g.store, metrics: m, log: g.log, keep: cfg.KeepRounds}
	g.att = &attachments{agent: g.agent, media: cfg.Media, store: g.store, metrics: m}
	g.room = newRooms(store, m, g)
	g.approvals = &approvals{store: cfg.Approvals, tools: cfg.Tools, ledger: cfg.Audit, metrics: m, log: g.log, route: g.route}
	g.commands = commands.Standard(commands.Deps{
		Conversations: g.store, Compactor: g.compactor, Skills: cfg.Skills, SkillSets: g.skills, Schedules: cfg.Schedules, Metrics: m, Log: g.log,
	})
	g.decider = &commands.Decider{
		Approvals: cfg.Approvals, Seen: g.store, Resolve: g.resolve,
		Send:    func(ctx context.Context, m channels.Message, r channels.Reply) { g.route(m).Send(ctx, r) },
		Awaited: func(channel string) bool { return g.caps(channel).Awaited != nil },
		Decided: g.approvals.decided, Wake: g.sched.wake, Metrics: m, Log: g.log,
	}
	return g
}

// Register adds a channel; replies to its messages go through it.
func (g *Gateway) Register(ch channels.Channel) {
	c := channels.CapabilitiesOf(ch)
	account := ""
	if a, ok := ch.(channels.Accounted); ok {
		account = a.Account()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.channels[channels.AdapterKey(ch.Name(), account)] = c
}

// Start launches the worker pool and the orphan sweep. Shutdown stops them.
func (g *Gateway) Start() {
	for i := 0; i < g.cfg.Workers; i++ {
		g.wg.Add(1)
		go g.worker()
	}
	g.wg.Go(g.sweep)
	if g.cfg.Outbox != nil {
		ctx, cancel := context.WithCancel(g.runCtx)
		g.mu.Lock()
		g.stopOutbox = cancel
		g.mu.Unlock()
		g.wg.Go(func() { g.cfg.Outbox.Run(ctx, func(name string) channels.Poster { return g.caps(name).Poster }) })
	}
}

// noChannel is the capabilities of a channel that is not registered.
var noChannel = &channels.Capabilities{}

// caps is what the adapter registered under key (channels.AdapterKey: a
// platform's name for its default account) can do (noChannel when none is
// registered under it).
func (g *Gateway) caps(name string) *channels.Capabilities {
	g.mu.Lock()
	c := g.channels[name]
	g.mu.Unlock()
	if c == nil {
		return noChannel
	}
	return c
}

// capsOf is what the adapter of m's platform and account can do: a reply
// leaves from the app the message came to.
func (g *Gateway) capsOf(m channels.Message) *channels.Capabilities {
	return g.caps(channels.AdapterKey(m.Channel, m.Account))
}

// route is how the replies to m are delivered.
func (g *Gateway) route(m channels.Message) delivery.Route {
	return g.out.For(g.capsOf(m), m)
}

// resolve is the policy of m's scope.
func (g *Gateway) resolve(m channels.Message) *policy.Effective {
	return g.cfg.Policy.Resolve(policy.Scope{Channel: m.Channel, Account: m.Account, Workspace: m.Workspace, Chat: m.Chat})
}

// Shutdown stops intake, lets running turns finish until ctx ends, then
// cancels what is left. Queued messages, and those of conversations
// waiting for a worker or a retry, stay in Redis for the next replica to
// serve. No goroutine of the gateway outlives it.
func (g *Gateway) Shutdown(ctx context.Context) error {
	if g.sched.close() {
		close(g.stop)
		g.mu.Lock()
		if g.stopOutbox != nil {
			g.stopOutbox()
		}
		g.mu.Unlock()
	}
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		g.cancelRun()
		return nil
	case <-ctx.Done():
		g.cancelRun()
		<-done
		return fmt.Errorf("gateway: turns still running at the shutdown deadline were cancelled: %w", ctx.Err())
	}
}

// queued is the inbox encoding of a message. The nonce keeps two identical
// messages distinct, since the inbox acknowledges by value.
type queued struct {
	Msg   channels.Message `json:"msg"`
	Nonce string           `json:"nonce"`
	// Trace is the receive span's traceparent, so that the turn, which
	// may run on another replica, joins the message's trace.
	Trace string `json:"trace,omitempty"`
	// Work is set on the work of a trigger (work.go).
	Work *triggers.Work `json:"work,omitempty"`
}

// Submit implements channels.Handler: the message is de-duplicated,
// marked and queued in one Redis script, and a worker is told.
func (g *Gateway) Submit(ctx context.Context, m channels.Message) (err error) {
	ctx, span := g.cfg.Tracer.StartKind(ctx, "receive", trace.SpanKindConsumer)
	defer func() {
		tracing.Fail(span, err)
		span.End()
	}()
	if span.IsRecording() {
		span.SetAttributes(attribute.String("parley.channel", m.Channel))
	}
	if g.sched.isClosed() {
		return ErrClosed
	}
	if m.Received.IsZero() {
		m.Received = time.Now()
	}
	g.metrics.MessagesReceived.WithLabelValues(m.Channel).Inc()
	g.metrics.AccountMessages.WithLabelValues(m.Channel, channels.AccountLabel(m.Account)).Inc()
	if ok, err := g.decideUnlessAmbient(ctx, m); ok || err != nil {
		if err != nil {
			g.redisFailed()
			return fmt.Errorf("gateway: decide an approval: %w", err)
		}
		return nil
	}
	conv := m.ConversationKey()
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	item, err := json.Marshal(queued{Msg: m, Nonce: hex.EncodeToString(nonce[:]), Trace: tracing.Inject(ctx)})
	if err != nil {
		return fmt.Errorf("gateway: encode message: %w", err)
	}
	res, err := g.store.Accept(ctx, conv, sessions.Arrival{
		Item: item, Limit: g.cfg.QueueLimit, ID: m.ID, Marks: m.Marks, RequireMark: m.RequireMark,
		Sender: m.User, AnswerOnly: strings.HasPrefix(m.Text, channels.AnswerCommand+" "),
	})
	if err != nil {
		g.redisFailed()
		return fmt.Errorf("gateway: queue message: %w", err)
	}
	switch res {
	case sessions.Duplicate:
		g.metrics.MessagesDeduplicated.WithLabelValues(m.Channel).Inc()
		g.log.Debug("duplicate message dropped", "channel", m.Channel, "id", m.ID)
	case sessions.Unmarked:
		return channels.ErrUnmarked
	case sessions.Answered:
		g.answered(ctx, m)
	case sessions.NotAsked:
		g.route(m).Send(ctx, channels.Reply{Notice: true, Text: "That question is not open to you: it was asked of someone else, or it is closed."})
	case sessions.QueueFull:
		// A flood into one conversation must not grow Redis without bound;
		// the sender hears why instead of waiting for an answer that never
		// comes (once: the id is recorded, so a re-delivery is a duplicate).
		g.metrics.MessagesRejected.WithLabelValues(m.Channel, "queue_full").Inc()
		if !m.Ambient && admits(g.resolve(m), m) {
			g.route(m).Send(ctx, channels.Reply{Notice: true, Failed: true, Text: "I'm still working through your earlier messages in this conversation. Please wait for my answers before sending more."})
		}
	default:
		g.sched.schedule(conv)
	}
	return nil
}

// admits reports whether the access rules eff holds let m's sender talk
// to the bot (admins always may). Whoever they refuse is answered only by
// the turn's own refusal, never by a note sent before it.
func admits(eff *policy.Effective, m channels.Message) bool {
	return eff.Access(m.User, m.Chat, m.DM).Allowed || eff.IsAdmin(m.User)
}
