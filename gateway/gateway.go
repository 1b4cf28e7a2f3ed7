// Package gateway routes messages from every channel to the agent: it drops
// duplicates, queues each message on its conversation in Redis, runs the
// turns of one conversation one at a time and in arrival order across all
// replicas, runs different conversations in parallel on a bounded pool, and
// sends the reply back through the channel the message came from.
//
// Ordering across replicas comes from the conversation inbox in Redis: a
// message is accepted by appending it there, and whichever replica holds the
// conversation lock drains the inbox from its head, acknowledging each item in
// the same atomic step that writes its turn. A replica that dies mid-turn
// leaves the item at the head; the next holder answers it.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
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
	Workers         int           // conversations served at once on this replica
	QueueLimit      int           // messages waiting in one conversation
	MaxMessageChars int           // longer user messages are refused
	LockRetry       time.Duration // wait between tries for a lock another replica holds
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
}

// Gateway is the router. Create it with New, register channels, then Start.
type Gateway struct {
	cfg     Config
	store   sessions.Store
	agent   Responder
	metrics *metrics.Metrics
	log     *slog.Logger

	mu       sync.Mutex
	channels map[string]channels.Channel
	active   map[string]bool // conversations a worker is draining
	dirty    map[string]bool // got a message while being drained
	ready    []string        // conversations waiting for a worker
	wake     chan struct{}
	closed   bool

	runCtx    context.Context // parent of every turn; cancelled at the shutdown deadline
	cancelRun context.CancelFunc
	stop      chan struct{} // closed when Shutdown begins
	wg        sync.WaitGroup
}

// Defaults of the Config fields that are not keys of the file (those
// fall back to the config.Default* constants).
const (
	DefaultLockRetry  = 200 * time.Millisecond
	DefaultSweepEvery = 30 * time.Second
)

func (c Config) withDefaults() Config {
	if c.Workers <= 0 {
		c.Workers = config.DefaultWorkers
	}
	if c.QueueLimit <= 0 {
		c.QueueLimit = config.DefaultQueueLimit
	}
	if c.MaxMessageChars <= 0 {
		c.MaxMessageChars = config.DefaultMaxMessageChars
	}
	if c.LockRetry <= 0 {
		c.LockRetry = DefaultLockRetry
	}
	if c.SweepEvery <= 0 {
		c.SweepEvery = DefaultSweepEvery
	}
	if c.CompactTokens <= 0 {
		c.CompactTokens = config.DefaultCompactTokens
	}
	if c.KeepRounds <= 0 {
		c.KeepRounds = config.DefaultKeepRounds
	}
	if c.SkillBudget <= 0 {
		c.SkillBudget = config.DefaultSkillBodyBudget
	}
	if c.Policy == nil {
		c.Policy = policy.New(config.Policies{})
	}
	return c
}

// New returns a gateway; it runs nothing until Start. m nil counts into a
// private registry; log nil discards.
func New(cfg Config, store sessions.Store, a Responder, m *metrics.Metrics, log *slog.Logger) *Gateway {
	cfg = cfg.withDefaults()
	if m == nil {
		m = metrics.New()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	return &Gateway{
		cfg: cfg, store: store, agent: a, metrics: m, log: log.With("component", "gateway"),
		channels: map[string]channels.Channel{},
		active:   map[string]bool{},
		dirty:    map[string]bool{},
		wake:     make(chan struct{}, 1),
		runCtx:   runCtx, cancelRun: cancel,
		stop: make(chan struct{}),
	}
}

// Register adds a channel; replies to its messages go through it.
func (g *Gateway) Register(ch channels.Channel) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.channels[ch.Name()] = ch
}

// Start launches the worker pool and the orphan sweep. Shutdown stops them.
func (g *Gateway) Start() {
	for i := 0; i < g.cfg.Workers; i++ {
		g.wg.Add(1)
		go g.worker()
	}
	g.wg.Go(g.sweep)
}

// sweep schedules conversations that have queued messages and no lock
// holder. A replica that dies after accepting a message leaves it queued;
// without the sweep it would wait for the conversation's next message.
func (g *Gateway) sweep() {
	t := time.NewTicker(g.cfg.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
			orphans, err := g.store.Orphans(g.runCtx)
			if err != nil {
				g.log.Warn("sweep for unserved conversations", "err", err)
			}
			for _, conv := range orphans {
				g.log.Info("serving a conversation left queued by another replica")
				g.schedule(conv)
			}
		}
	}
}

// Shutdown stops intake, lets running turns finish until ctx ends, then
// cancels what is left. Queued messages stay in the store for the next
// replica to serve. No goroutine of the gateway outlives it.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		close(g.stop)
	}
	g.mu.Unlock()
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
}

// Submit implements channels.Handler.
func (g *Gateway) Submit(ctx context.Context, m channels.Message) error {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if m.Received.IsZero() {
		m.Received = time.Now()
	}
	g.metrics.MessagesReceived.WithLabelValues(m.Channel).Inc()
	if m.ID != "" {
		dup, err := g.store.Seen(ctx, m.Channel, m.ID)
		if err != nil {
			return fmt.Errorf("gateway: dedupe: %w", err)
		}
		if dup {
			g.metrics.MessagesDeduplicated.WithLabelValues(m.Channel).Inc()
			g.log.Debug("duplicate message dropped", "channel", m.Channel, "id", m.ID)
			return nil
		}
	}
	conv := m.ConversationKey()
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	item, err := json.Marshal(queued{Msg: m, Nonce: hex.EncodeToString(nonce[:])})
	if err != nil {
		return fmt.Errorf("gateway: encode message: %w", err)
	}
	// From here on a failure must undo the de-dup record, or the
	// platform's re-delivery of a message we never queued would be dropped.
	accepted := false
	if m.ID != "" {
		defer func() {
			if !accepted {
				if err := g.store.Forget(context.WithoutCancel(ctx), m.Channel, m.ID); err != nil {
					g.log.Warn("could not forget a message that was not queued; a re-delivery will be dropped", "channel", m.Channel, "err", err)
				}
			}
		}()
	}
	_, err = g.store.Enqueue(ctx, conv, item, g.cfg.QueueLimit)
	if errors.Is(err, sessions.ErrQueueFull) {
		// A flood into one conversation must not grow Redis without bound;
		// the sender hears why instead of waiting for an answer that never comes.
		g.metrics.MessagesRejected.WithLabelValues(m.Channel, "queue_full").Inc()
		g.send(ctx, m, channels.Reply{Notice: true, Text: "I'm still working through your earlier messages in this conversation. Please wait for my answers before sending more."})
		accepted = true // answered: a re-delivery must not be answered again
		return nil
	}
	if err != nil {
		return fmt.Errorf("gateway: queue message: %w", err)
	}
	accepted = true
	g.schedule(conv)
	return nil
}

func (g *Gateway) schedule(conv string) {
	g.mu.Lock()
	if g.active[conv] {
		g.dirty[conv] = true
		g.mu.Unlock()
		return
	}
	g.active[conv] = true
	g.ready = append(g.ready, conv)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// next blocks until a conversation is ready or Shutdown begins.
func (g *Gateway) next() (string, bool) {
	for {
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			return "", false
		}
		if len(g.ready) > 0 {
			conv := g.ready[0]
			g.ready = g.ready[1:]
			more := len(g.ready) > 0
			g.mu.Unlock()
			if more { // pass the wake-up on to another idle worker
				select {
				case g.wake <- struct{}{}:
				default:
				}
			}
			return conv, true
		}
		g.mu.Unlock()
		select {
		case <-g.wake:
		case <-g.stop:
		}
	}
}

func (g *Gateway) worker() {
	defer g.wg.Done()
	for {
		conv, ok := g.next()
		if !ok {
			return
		}
		for {
			g.drain(conv)
			g.mu.Lock()
			if g.dirty[conv] && !g.closed {
				delete(g.dirty, conv)
				g.mu.Unlock()
				continue
			}
			delete(g.dirty, conv)
			delete(g.active, conv)
			g.mu.Unlock()
			break
		}
	}
}

func (g *Gateway) stopping() bool {
	select {
	case <-g.stop:
		return true
	default:
		return false
	}
}

// drain serves conv's inbox until it is empty or the gateway stops. When
// another replica holds the lock it waits while messages remain: that holder
// drains the inbox, and if it died the lock expires and this worker takes
// over. After releasing, it looks once more, because a message queued while
// the lock was held by us may have been passed over by its own replica.
func (g *Gateway) drain(conv string) {
	ctx := g.runCtx
	for !g.stopping() {
		lock, err := g.store.TryLock(ctx, conv)
		if errors.Is(err, sessions.ErrLocked) {
			if !g.pending(ctx, conv) {
				return
			}
			select {
			case <-time.After(g.cfg.LockRetry):
			case <-g.stop:
				return
			}
			continue
		}
		if err != nil {
			g.log.Error("lock conversation", "err", err)
			return
		}
		g.serve(ctx, lock)
		if err := lock.Release(context.WithoutCancel(ctx)); err != nil {
			g.log.Warn("release conversation lock", "err", err)
		}
		if !g.pending(ctx, conv) {
			return
		}
	}
}

// pending reports whether conv has queued messages.
func (g *Gateway) pending(ctx context.Context, conv string) bool {
	_, ok, err := g.store.Head(ctx, conv)
	if err != nil {
		g.log.Error("read conversation queue", "err", err)
		return false
	}
	return ok
}

// serve runs the queued turns of a locked conversation, oldest first.
func (g *Gateway) serve(ctx context.Context, lock *sessions.Lock) {
	conv := lock.Conversation()
	for !g.stopping() && !lock.Lost() {
		item, ok, err := g.store.Head(ctx, conv)
		if err != nil {
			g.log.Error("read conversation queue", "err", err)
			return
		}
		if !ok {
			return
		}
		var q queued
		if err := json.Unmarshal(item, &q); err != nil {
			g.log.Error("dropping an undecodable queued message", "err", err)
			if err := g.store.Ack(ctx, lock, item); err != nil {
				return
			}
			continue
		}
		if err := g.handle(ctx, lock, item, q.Msg); err != nil {
			g.log.Error("turn failed", "channel", q.Msg.Channel, "err", err)
			if errors.Is(err, sessions.ErrLockLost) || ctx.Err() != nil {
				return
			}
			// The item is still at the head; acknowledge it so one bad
			// message cannot wedge its conversation.
			if err := g.store.Ack(ctx, lock, item); err != nil {
				return
			}
		}
	}
}

// handle answers one message under the conversation lock.
func (g *Gateway) handle(ctx context.Context, lock *sessions.Lock, item []byte, m channels.Message) error {
	g.metrics.QueueWaitSeconds.WithLabelValues(m.Channel).Observe(time.Since(m.Received).Seconds())
	text := strings.TrimSpace(m.Text)
	eff := g.cfg.Policy.Resolve(policy.Scope{Channel: m.Channel, Workspace: m.Workspace, Chat: m.Chat})
	if d := eff.Access(m.User, m.Chat, m.DM); !d.Allowed && !eff.IsAdmin(m.User) {
		return g.refuseAccess(ctx, lock, item, m, d)
	}
	if strings.HasPrefix(strings.ToLower(text), "/skill:") {
		return g.turn(ctx, lock, item, m, eff, text)
	}
	if reply, ok, err := g.command(ctx, lock, m, eff, text); ok {
		if err != nil {
			return err
		}
		if err := g.store.Ack(ctx, lock, item); err != nil {
			return err
		}
		g.send(ctx, m, channels.Reply{Text: reply, Notice: true})
		return nil
	}
	if n := utf8.RuneCountInString(text); n > g.cfg.MaxMessageChars {
		g.metrics.MessagesRejected.WithLabelValues(m.Channel, "message_too_long").Inc()
		if err := g.store.Ack(ctx, lock, item); err != nil {
			return err
		}
		g.send(ctx, m, channels.Reply{Notice: true, Text: fmt.Sprintf(
			"Sorry, that message is too long for me (%d characters; the limit is %d). Please shorten it or split it up.", n, g.cfg.MaxMessageChars)})
		return nil
	}
	if text == "" {
		return g.store.Ack(ctx, lock, item)
	}
	return g.turn(ctx, lock, item, m, eff, text)
}

// refuseAccess answers someone the policy does not let in: once per
// conversation a day, so a persistent sender is not answered every time,
// and nothing reaches the model.
func (g *Gateway) refuseAccess(ctx context.Context, lock *sessions.Lock, item []byte, m channels.Message, d policy.Decision) error {
	g.metrics.PolicyDenials.WithLabelValues(m.Channel, "access").Inc()
	g.metrics.MessagesRejected.WithLabelValues(m.Channel, "access").Inc()
	g.log.Info("access refused", "channel", m.Channel, "rule", d.Rule, "level", d.Level)
	if err := g.store.Ack(ctx, lock, item); err != nil {
		return err
	}
	told, err := g.store.Seen(ctx, "access-refusal", lock.Conversation()+":"+m.User)
	if err != nil {
		return err
	}
	if !told {
		g.send(ctx, m, channels.Reply{Notice: true, Text: "Sorry, I'm not available to you here. Please ask an administrator of this bot if you think you should have access."})
	}
	return nil
}

func (g *Gateway) turn(ctx context.Context, lock *sessions.Lock, item []byte, m channels.Message, eff *policy.Effective, text string) error {
	start := time.Now()
	g.metrics.TurnsInFlight.Inc()
	defer g.metrics.TurnsInFlight.Dec()
	if ch, ok := g.channel(m.Channel).(channels.Typing); ok {
		stop := ch.StartTyping(ctx, m)
		defer stop()
	}
	conv := lock.Conversation()
	history, err := g.store.History(ctx, conv)
	if err != nil {
		return err
	}
	if agent.EstimateTokens(history) > g.cfg.CompactTokens {
		history, _ = g.compact(ctx, lock, m.Channel, history)
	}
	set := g.skillSet(ctx, eff)
	var preface []sessions.Message
	if name, args, ok := manualSkill(text); ok {
		var refusal string
		preface, text, refusal = g.invokeSkill(set, history, name, args)
		if refusal != "" {
			if err := g.store.Ack(ctx, lock, item); err != nil {
				return err
			}
			g.send(ctx, m, channels.Reply{Notice: true, Text: refusal})
			return nil
		}
		g.metrics.SkillInvocations.WithLabelValues(m.Channel, name).Inc()
	}
	index, omitted := set.Index()
	if len(omitted) > 0 {
		g.log.Debug("skills left out of the index; find_skills still reaches them", "omitted", omitted)
	}
	g.metrics.SkillIndexBytes.Set(float64(len(index)))
	res, err := g.agent.Run(ctx, agent.TurnRequest{
		Channel: m.Channel, Workspace: m.Workspace, Chat: m.Chat, Conversation: conv, User: m.User,
		History: history, UserText: text, SystemExtra: index, Skills: set, Preface: preface,
		Allow: g.toolPolicy(eff),
	})
	outcome := metrics.OutcomeOK
	if err != nil {
		g.observeTurn(m.Channel, metrics.OutcomeError, start)
		return fmt.Errorf("gateway: agent: %w", err)
	}
	if res.Failed {
		outcome = metrics.OutcomeError
	}
	trimmed, err := g.store.CommitTurn(ctx, lock, res.Messages, item)
	if err != nil {
		g.observeTurn(m.Channel, metrics.OutcomeError, start)
		return fmt.Errorf("gateway: write turn: %w", err)
	}
	if trimmed {
		g.metrics.HistoryTrimmed.WithLabelValues(m.Channel).Inc()
	}
	g.send(ctx, m, channels.Reply{Text: res.Reply})
	g.observeTurn(m.Channel, outcome, start)
	return nil
}

func (g *Gateway) channel(name string) channels.Channel {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.channels[name]
}

func (g *Gateway) send(ctx context.Context, m channels.Message, r channels.Reply) {
	ch := g.channel(m.Channel)
	outcome := metrics.OutcomeOK
	if ch == nil {
		g.log.Error("no channel registered for reply", "channel", m.Channel)
		outcome = metrics.OutcomeError
	} else if err := ch.Send(ctx, m, r); err != nil {
		g.log.Error("send reply", "channel", m.Channel, "err", err)
		outcome = metrics.OutcomeError
	}
	g.metrics.RepliesSent.WithLabelValues(m.Channel, outcome).Inc()
}

func (g *Gateway) observeTurn(channel, outcome string, start time.Time) {
	g.metrics.TurnDuration.WithLabelValues(channel, outcome).Observe(time.Since(start).Seconds())
}
