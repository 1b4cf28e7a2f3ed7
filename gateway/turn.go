package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway/approval"
	"github.com/parleyhq/parley/gateway/delivery"
	"github.com/parleyhq/parley/gateway/outbox"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/retry"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/tracing"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
)

// lockMargin is added to the remaining life of another holder's lock
// before the conversation is tried again, so that the try comes after the
// lock would have expired.
const lockMargin = 50 * time.Millisecond

// delayedReply tells a user that their message was answered but the answer
// could not be stored, so it will come later. It is sent once per message.
const delayedReply = "Sorry — I couldn't save this conversation just now, so my answer is delayed. I'll answer as soon as I can."

// droppedReply answers a message whose turn failed for a reason of its own
// (not the model's, not Redis'): it is dropped rather than retried.
const droppedReply = "Sorry — something went wrong while answering this message, so I dropped it. Please try again; if it keeps happening, tell an administrator of this bot."

// blankReply answers a blank message on a channel whose sender waits for
// an answer; elsewhere a blank message is left unanswered.
const blankReply = "Your message was empty, so there is nothing to answer."

// result is what one claimed message produced: the messages to append to
// the history and the reply to send once they are written.
type result struct {
	msgs    []sessions.Message
	reply   *channels.Reply
	channel string
	turn    bool      // a model turn, observed in the turn metrics
	start   time.Time // when the turn began
	outcome string    // of the model turn
	// stopTyping clears the channel's typing indicator once the reply is
	// sent (or the turn given up); nil when none was shown.
	stopTyping func()
	// live shows the answer while it is written, on channels that can;
	// finish delivers the reply through it or discards it.
	live *delivery.Live
	// route delivers the reply; chosen with the live reply, else by
	// finish.
	route delivery.Route
	// pause is set when the turn waits for approval of a call; resumed is
	// the approval of the paused turn this one continued.
	pause   *pending
	resumed *approval.Record
	// replyTo, when set, is the message the reply answers instead of the
	// claimed one: the approval a sender waits on the answer to.
	replyTo *channels.Message
	// spent is what the model cost, for the budget and the usage report
	// (nil: neither counts it).
	spent *spent
	// tokens are the model's tokens of the turn, prompt and completion.
	tokens int
	// room is what the turn changes of its conversation's room (the
	// cursor, the ambient messages), written with the turn.
	room sessions.RoomWrite
	// files are the kept files the answer sends (send_file), after it.
	files []agent.Outgoing
}

// storeError marks a failure of Redis during a turn: the message stays
// queued and the conversation is tried again later.
type storeError struct{ err error }

func (e storeError) Error() string { return e.err.Error() }
func (e storeError) Unwrap() error { return e.err }

// serve runs at most one turn of conv: claim (lock, oldest message and
// history in one step), answer, complete (turn written, message removed,
// lock released in one step).
func (g *Gateway) serve(conv string) next {
	ctx := g.runCtx
	claimed := time.Now()
	c, err := g.store.Claim(ctx, conv)
	var locked *sessions.LockedError
	switch {
	case errors.As(err, &locked):
		// Another replica is serving the conversation. Its Complete reports
		// what is still queued, so it serves this message too; look again
		// only when its lock would have expired, in case its holder died.
		return next{retryIn: locked.Expires + lockMargin}
	case err != nil:
		if ctx.Err() == nil {
			// The sweep's wait for Redis says so once; not every retry.
			g.log.Debug("cannot claim a conversation; trying again", "err", err)
			g.redisFailed()
		}
		return next{failed: true}
	case c == nil:
		return next{}
	}
	claimedAt := time.Now()
	var q queued
	if err := json.Unmarshal(c.Item, &q); err != nil {
		g.log.Error("dropping an undecodable queued message", "err", err)
		return g.finish(ctx, c, q, result{})
	}
	// The turn joins the trace of the message's receive span, on whichever
	// replica that ran.
	parent := tracing.Extract(ctx, q.Trace)
	g.cfg.Tracer.Between(parent, "queue", q.Msg.Received, claimed)
	ctx, span := g.cfg.Tracer.StartAt(parent, "turn", claimed)
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(attribute.String("parley.channel", q.Msg.Channel), attribute.Int64("parley.queued", c.Queued))
		g.cfg.Tracer.Between(ctx, "lock", claimed, claimedAt,
			attribute.Int("parley.history.messages", c.History.Len()), attribute.Int("parley.history.bytes", c.History.Bytes()))
	}
	var r result
	switch {
	case q.Work != nil && g.threaded(*q.Work):
		return g.threadWork(ctx, c, q)
	case q.Work != nil:
		r, err = g.work(ctx, c, q)
	default:
		r, err = g.answer(ctx, c, q.Msg)
	}
	var se storeError
	switch {
	case err == nil && r.pause != nil:
		return g.pauseTurn(ctx, c, q, r)
	case err == nil:
		return g.finish(ctx, c, q, r)
	case errors.Is(err, sessions.ErrLockLost):
		g.log.WarnContext(ctx, "conversation lock lost mid-turn; its next holder answers the message", "channel", q.Msg.Channel)
		g.release(c.Lock) // ends the renewal; the lock itself is another's
		return next{}
	case ctx.Err() != nil:
		// The shutdown deadline: the message stays queued for whoever is next.
		g.release(c.Lock)
		return next{}
	case errors.As(err, &se):
		tracing.Fail(span, err)
		g.log.WarnContext(ctx, "redis failed during a turn; the message stays queued", "channel", q.Msg.Channel, "err", err)
		g.release(c.Lock)
		g.redisFailed()
		return next{failed: true}
	}
	// Anything else is this message's own problem: drop it so that it
	// cannot wedge its conversation, and say so, so that nobody waits for
	// an answer that will not come.
	tracing.Fail(span, err)
	g.log.ErrorContext(ctx, "turn failed; dropping the message", "channel", q.Msg.Channel, "err", err)
	if r.reply == nil {
		r.reply = &channels.Reply{Notice: true, Failed: true, Text: droppedReply}
	}
	return g.finish(ctx, c, q, r)
}

// finish writes what a message produced, then sends the reply. A write
// that keeps failing leaves the message queued, and its user is told once
// that the answer is delayed.
func (g *Gateway) finish(ctx context.Context, c *sessions.Claim, q queued, r result) next {
	if r.stopTyping != nil {
		defer r.stopTyping()
	}
	to := q.Msg
	if r.replyTo != nil {
		to = *r.replyTo
	}
	rt := r.route
	if !rt.Chosen() {
		rt = g.route(to)
	}
	var slot *outbox.Slot
	var reserve sessions.Along
	if r.reply != nil {
		reserve = rt.Reserve(ctx, *r.reply, r.live, &slot)
	}
	g.writeRoomWithTurn(c.Lock, r.room)
	done, err := g.complete(ctx, c, r.msgs, r.spent, reserve)
	if err != nil {
		// The message is answered again, here or elsewhere: what was shown
		// of this answer goes.
		r.live.Discard(ctx)
	}
	switch {
	case errors.Is(err, sessions.ErrLockLost):
		g.log.WarnContext(ctx, "conversation lock lost before the turn was written; its next holder answers the message", "channel", q.Msg.Channel)
		observe(ctx, g.metrics, r, metrics.OutcomeError)
		return next{}
	case err != nil:
		g.release(c.Lock)
		observe(ctx, g.metrics, r, metrics.OutcomeError)
		if ctx.Err() != nil {
			return next{} // the shutdown deadline: the message stays queued for the next holder
		}
		g.log.ErrorContext(ctx, "could not write the turn; the message stays queued and is answered again", "channel", q.Msg.Channel, "err", err)
		g.redisFailed()
		if r.reply != nil && g.apologies.first(q.Nonce) {
			g.route(q.Msg).Send(ctx, channels.Reply{Notice: true, Text: delayedReply})
		}
		return next{failed: true}
	}
	g.apologies.forget(q.Nonce)
	g.approvals.drop(ctx, c.Lock.Conversation(), r)
	if done.Trimmed {
		g.metrics.HistoryTrimmed.WithLabelValues(q.Msg.Channel).Inc()
	}
	// The turn is counted before its reply goes out, so that whoever sees
	// the reply (a user, a test, a dashboard a moment later) also sees the
	// turn in the metrics; delivery time has metrics of its own.
	observe(ctx, g.metrics, r, r.outcome)
	logTurn(ctx, g.log, c.Lock.Conversation(), r)
	if r.reply != nil {
		rt.Deliver(ctx, *r.reply, r.live, slot)
		g.sendFiles(ctx, rt, c, r.files)
	} else {
		r.live.Discard(ctx)
		if u := g.capsOf(q.Msg).Unanswered; u != nil {
			u.LeftUnanswered(ctx, q.Msg) // its sender's open request ends now
		}
	}
	return next{again: done.Queued > 0}
}

// complete runs Complete, retrying a failure with backoff for as long as
// the lock is certainly still ours: past that, another replica may be
// answering the message, and the turn must not be written twice.
//
// What the turn spent (when not nil) is counted in the pipeline of the
// first attempt — the user's budget and the usage report, each in a slot
// of its own — so that it costs no round trip of its own. It is sent even
// when the lock turns out lost and the turn is not written: the tokens
// were spent all the same, and the next holder's answer is a turn of its
// own. It is never sent again with a retry (the first may have landed),
// and its failure is logged, never the turn's.
//
// The room's write, kept with the lock, goes with every attempt: it lands
// only with the turn, and once.
func (g *Gateway) complete(ctx context.Context, c *sessions.Claim, msgs []sessions.Message, s *spent, reserve sessions.Along) (_ sessions.Completion, err error) {
	ctx, span := g.cfg.Tracer.Start(ctx, "commit")
	defer func() {
		tracing.Fail(span, err)
		span.End()
	}()
	var along []sessions.Along
	var settle func(context.Context)
	if s != nil {
		along = append(along, func(p redis.Pipeliner) { settle = g.acct.countAlong(ctx, s, p) })
	}
	if reserve != nil {
		along = append(along, reserve)
	}
	var done sessions.Completion
	err = g.redisRetry.Do(ctx, "complete turn", func(ctx context.Context) (bool, time.Duration, error) {
		var err error
		done, err = g.store.Complete(ctx, c.Lock, c.Item, msgs, along...)
		along = nil
		if err == nil || errors.Is(err, sessions.ErrLockLost) {
			return false, 0, err
		}
		return c.Lock.Held(), 0, retry.Mark(retry.ReasonOf(err, 0), err)
	})
	switch {
	case settle != nil:
		settle(context.WithoutCancel(ctx))
	case s != nil:
		// Complete gave up before its pipeline was sent.
		g.acct.count(ctx, s)
	}
	return done, err
}

// release gives the lock back after a turn that wrote nothing. When Redis
// cannot be reached the lock expires by itself within its TTL.
func (g *Gateway) release(l *sessions.Lock) {
	if err := l.Release(context.WithoutCancel(g.runCtx)); err != nil {
		g.log.Warn("release conversation lock", "err", err)
	}
}

// handle answers one message under the conversation lock.
func (g *Gateway) handle(ctx context.Context, c *sessions.Claim, m channels.Message) (result, error) {
	tracing.Observe(ctx, g.metrics.QueueWaitSeconds.WithLabelValues(m.Channel), time.Since(m.Received).Seconds())
	text := strings.TrimSpace(m.Text)
	eff := g.resolve(m)
	if d := eff.Access(m.User, m.Chat, m.DM); !d.Allowed && !eff.IsAdmin(m.User) && !m.Ambient {
		return g.refuseAccess(ctx, c.Lock, m, d)
	}
	if m.Ambient {
		return g.keepAmbient(m, eff), nil
	}
	if m.Unsupported != "" {
		g.metrics.MessagesRejected.WithLabelValues(m.Channel, "unsupported").Inc()
		return result{reply: &channels.Reply{Notice: true, Text: m.Unsupported}}, nil
	}
	// The limit comes before every path a text can take (a /skill:NAME
	// request and the commands too), so that no prefix reaches the model
	// with more than it.
	if n := utf8.RuneCountInString(text); n > g.cfg.MaxMessageChars {
		g.metrics.MessagesRejected.WithLabelValues(m.Channel, "message_too_long").Inc()
		return result{reply: &channels.Reply{Notice: true, Failed: true, Text: fmt.Sprintf(
			"Sorry, that message is too long for me (%d characters; the limit is %d). Please shorten it or split it up.", n, g.cfg.MaxMessageChars)}}, nil
	}
	if name, _, ok := manualSkill(text); ok {
		if name == "" {
			return result{reply: &channels.Reply{Notice: true, Text: "Which skill? Write `/skill:NAME` and your request, e.g. `/skill:skill-authoring draft a skill for our release checklist`."}}, nil
		}
		return g.turn(ctx, c, m, eff, text)
	}
	if reply, ok, err := g.commands.Run(ctx, c.Lock, m, eff, text); ok {
		if err != nil {
			return result{}, storeError{err}
		}
		return result{reply: &channels.Reply{Text: reply, Notice: true}}, nil
	}
	if text == "" && len(m.Attachments) == 0 {
		if g.capsOf(m).Awaited != nil {
			return result{reply: &channels.Reply{Notice: true, Failed: true, Text: blankReply}}, nil
		}
		return result{}, nil
	}
	return g.turn(ctx, c, m, eff, text)
}

// refuseAccess answers someone the policy does not let in: once per
// conversation a day, so a persistent sender is not answered every time
// (except on a channel whose sender waits for each answer), and nothing
// reaches the model.
func (g *Gateway) refuseAccess(ctx context.Context, lock *sessions.Lock, m channels.Message, d policy.Decision) (result, error) {
	g.metrics.PolicyDenials.WithLabelValues(m.Channel, "access").Inc()
	g.metrics.MessagesRejected.WithLabelValues(m.Channel, "access").Inc()
	g.refusals.Log(ctx, g.log, slog.LevelInfo, "access", m.Channel, "access refused", "channel", m.Channel, "rule", d.Rule, "level", d.Level)
	if m.Unsupported != "" {
		// An image or a sticker asks nothing: answering it, even with the
		// refusal, would only tell a stranger that a bot is listening.
		return result{}, nil
	}
	told, err := g.store.Seen(ctx, "access-refusal", lock.Conversation()+":"+m.User)
	if err != nil {
		return result{}, storeError{err}
	}
	if told && g.capsOf(m).Awaited == nil {
		return result{}, nil
	}
	return result{reply: &channels.Reply{Notice: true, Failed: true, Text: "Sorry, I'm not available to you here. Please ask an administrator of this bot if you think you should have access."}}, nil
}

// startTyping shows the typing indicator of m's channel, which has caps,
// once the turn has run for delay; the returned func clears it (or
// cancels it, if not shown yet). nil when the channel has no indicator.
func startTyping(ctx context.Context, caps *channels.Capabilities, m channels.Message, delay time.Duration) func() {
	if caps.Typing == nil {
		return nil
	}
	return channels.TypingAfter(ctx, caps.Typing, m, delay)
}

func (g *Gateway) turn(ctx context.Context, c *sessions.Claim, m channels.Message, eff *policy.Effective, text string) (result, error) {
	if notice, refused, err := g.acct.admit(ctx, m, eff, g.capsOf(m).Awaited != nil); err != nil || refused {
		return result{reply: notice}, err
	}
	r := result{channel: m.Channel, turn: true, start: time.Now(), outcome: metrics.OutcomeOK}
	g.metrics.TurnsInFlight.Inc()
	defer g.metrics.TurnsInFlight.Dec()
	r.stopTyping = startTyping(ctx, g.capsOf(m), m, g.cfg.TypingDelay)
	handedOver := false
	defer func() {
		if !handedOver && r.stopTyping != nil {
			r.stopTyping()
		}
	}()
	// The history stays encoded unless compaction or a manual skill needs
	// its values.
	history := c.History
	if agent.EstimateStoredTokens(history) > g.cfg.CompactTokens {
		history = g.compactor.compactStored(ctx, c.Lock, m.Channel, history)
	}
	set := g.skills.Set(ctx, eff)
	var preface []sessions.Message
	if name, args, ok := manualSkill(text); ok {
		decoded, err := history.Messages()
		if err != nil {
			return r, err
		}
		var refusal string
		preface, text, refusal = g.skills.invoke(set, decoded, name, args)
		if refusal != "" {
			handedOver = true
			return result{reply: &channels.Reply{Notice: true, Text: refusal}, stopTyping: r.stopTyping}, nil
		}
		g.metrics.SkillInvocations.WithLabelValues(m.Channel, name).Inc()
		if set.Used != nil {
			set.Used(name)
		}
	}
	tm, err := g.att.prepare(ctx, g.capsOf(m).AttachmentFetcher, c.Lock.Conversation(), m, eff, history)
	if err != nil {
		return r, err
	}
	if tm.text != "" {
		text = strings.TrimSpace(text + "\n\n" + tm.text)
	}
	room := g.readRoom(ctx, c, m, eff)
	if room.Text != "" {
		text = room.Text + "\n\n" + text
	}
	r.room = room.Write
	index, omitted := set.Index()
	if len(omitted) > 0 {
		g.log.DebugContext(ctx, "skills left out of the index; find_skills still reaches them", "omitted", omitted)
	}
	rt := g.route(m)
	live := rt.StartLive(ctx, c)
	if live.Holds() && r.stopTyping != nil {
		// The live reply says when the turn has outlasted the typing
		// delay with nothing to show; until then no indicator is needed.
		r.stopTyping()
		r.stopTyping = live.TypingWhenWaiting(func() func() { return startTyping(ctx, g.capsOf(m), m, 0) })
	}
	ctx = withAskingTurn(ctx, askingTurn{conv: c.Lock.Conversation(), m: m, rt: rt, timeout: eff.ApprovalTimeout(), events: live.Events()})
	if r.stopTyping != nil {
		live.OnVisible(r.stopTyping)
	}
	defer func() {
		if !handedOver {
			live.Discard(ctx)
		}
	}()
	res, err := g.agent.Run(ctx, agent.TurnRequest{
		Channel: m.Channel, Workspace: m.Workspace, Chat: m.Chat, Conversation: c.Lock.Conversation(), User: m.User,
		History: history, UserText: text, SystemExtra: index, Persona: persona(eff), Skills: set, Preface: preface,
		Allow: g.allowTools(eff, rt), Files: g.fileKeeper(),
		// The queued item, nonce included, is the same on every attempt
		// at this message and differs from every other message's.
		Item: itemID(c.Item), Calls: g.store, Audit: g.cfg.Audit,
		Events:  live.Events(),
		Model:   eff.ModelKey(),
		Approve: g.approvals.approveFunc(eff),

		Attachments: tm.refs, Images: tm.images, HistoryImages: tm.history,
		Compact: g.compactor.forTurn(c.Lock, m.Channel, history),
	})
	if err != nil {
		observe(ctx, g.metrics, r, metrics.OutcomeError)
		return result{}, fmt.Errorf("gateway: agent: %w", err)
	}
	r.live, r.route = live, rt
	handedOver = true // finish (or the pause) clears the indicator and ends the live reply
	r = g.ran(ctx, m, eff, r, res)
	if r.reply != nil {
		r.reply.Text = withNotes(r.reply.Text, tm.notes)
	}
	return r, nil
}

// persona is what the profile in effect makes of the system prompt.
func persona(eff *policy.Effective) agent.Persona {
	p := eff.Profile()
	return agent.Persona{Name: p.Name, Prompt: p.SystemPrompt, Append: p.SystemPromptAppend}
}

// itemID names a queued item by its content.
func itemID(item []byte) string {
	sum := sha256.Sum256(item)
	return hex.EncodeToString(sum[:16])
}
