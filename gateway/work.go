package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/triggers"
)

// Work from a trigger (an alert, a schedule's fire) is a message of its
// destination's conversation: it is accepted into that conversation's
// inbox with its de-dup record, in the same script as a chat message, and
// served in its turn under the conversation's lock. What it does there:
//
//   - answer post: its Text is the reply, delivered as any reply is (the
//     outbox for a channel that posts part by part);
//   - answer agent: its Text, when there is one, is that reply, and the
//     agent turn is a second item queued behind it in the same
//     conversation; the turn's user text is the Prompt with the Data in
//     the untrusted-data envelope, after /skill:NAME when a Skill is set,
//     under the destination chat's policy;
//   - a Group (an alert group) is answered in one thread of the chat: the
//     work is queued on the chat, whose lock orders the group's work; the
//     first posts its Text as the thread's root and records the root in
//     triggers.Threads, and every work of the group goes on in that
//     thread's conversation, where people's replies continue it. A
//     work that changes the group's state (resolved, firing again) also
//     edits the root to its RootText (rootedit.go).

// var _ checks that the gateway is what trigger sources are handed.
var _ triggers.Submitter = (*Gateway)(nil)

// workRetryMax bounds the wait before a work whose root post failed is
// tried again.
const workRetryMax = time.Minute

// SubmitWork implements triggers.Submitter: w is queued durably on its
// destination's conversation (or dropped as a duplicate of work with its
// ID) before it returns nil.
func (g *Gateway) SubmitWork(ctx context.Context, w triggers.Work) error {
	if err := w.Validate(); err != nil {
		return err
	}
	if w.EditRoot != "" || w.Posted != "" {
		// Only the gateway edits a post, one it made, and says what it
		// posted: a source naming a post to rewrite, or words to put in
		// the bot's mouth, would deface the chat or its history.
		return fmt.Errorf("gateway: work %s: edit_root and posted are the gateway's own", w.Trigger)
	}
	if g.sched.isClosed() {
		return ErrClosed
	}
	if g.caps(channels.AdapterKey(w.To.Platform, w.To.Account)) == noChannel {
		return fmt.Errorf("gateway: work %s: no channel %q is configured", w.Trigger, channels.AdapterKey(w.To.Platform, w.To.Account))
	}
	return g.queueWork(ctx, w)
}

// workMessage is the message w is queued as: its destination instead of
// a sender, the trigger as its user.
func (g *Gateway) workMessage(w triggers.Work) channels.Message {
	m := channels.Message{
		ID: "work:" + w.ID, Channel: w.To.Platform, Account: w.To.Account, Workspace: w.To.Workspace, Chat: w.To.Chat, Thread: w.To.Thread,
		User: w.Trigger, UserName: w.Trigger, Text: w.Prompt, Received: time.Now(),
	}
	// A thread the trigger posts in is one the bot takes part in:
	// people's replies there reach it as replies to any answer do.
	if a := g.capsOf(m).Addresser; a != nil {
		a.Address(&m)
	}
	return m
}

// queueWork appends w to its conversation's inbox.
func (g *Gateway) queueWork(ctx context.Context, w triggers.Work) error {
	m := g.workMessage(w)
	g.metrics.MessagesReceived.WithLabelValues(m.Channel).Inc()
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	item, err := json.Marshal(queued{Msg: m, Nonce: hex.EncodeToString(nonce[:]), Work: &w})
	if err != nil {
		return fmt.Errorf("gateway: encode work: %w", err)
	}
	conv := m.ConversationKey()
	res, err := g.store.Accept(ctx, conv, sessions.Arrival{Item: item, Limit: g.cfg.QueueLimit, ID: m.ID, Marks: m.Marks})
	if err != nil {
		g.redisFailed()
		return fmt.Errorf("gateway: queue work: %w", err)
	}
	switch res {
	case sessions.Duplicate:
		g.metrics.MessagesDeduplicated.WithLabelValues(m.Channel).Inc()
	case sessions.QueueFull:
		g.metrics.MessagesRejected.WithLabelValues(m.Channel, "queue_full").Inc()
		return fmt.Errorf("gateway: work %s: the destination's conversation is full", w.Trigger)
	default:
		g.sched.schedule(conv)
	}
	return nil
}

// threaded reports whether w is to be answered in its group's thread,
// which threadWork finds or starts first.
func (g *Gateway) threaded(w triggers.Work) bool {
	return w.EditRoot != "" || w.Group != "" && w.To.Thread == "" && g.cfg.Threads != nil
}

// work answers the work q carries under c's lock.
func (g *Gateway) work(ctx context.Context, c *sessions.Claim, q queued) (result, error) {
	w := *q.Work
	switch {
	case w.Answer == triggers.AnswerAgent && (w.Text != "" || w.Posted != ""):
		// The post first, then the turn, in this order in the
		// conversation; queued again with the same ID after a crash, the
		// turn is a duplicate, and the post goes out with this commit.
		turn := w
		turn.ID, turn.Text, turn.Posted = w.ID+":turn", "", ""
		if err := g.queueWork(ctx, turn); err != nil {
			return result{}, storeError{err}
		}
		return result{reply: postOf(w), msgs: saidBy(w)}, nil
	case w.Answer == triggers.AnswerPost:
		return result{reply: postOf(w), msgs: saidBy(w)}, nil
	}
	rec, err := g.approvals.pausedOn(ctx, c, q.Msg)
	if err != nil {
		return result{}, storeError{err}
	}
	if rec != nil {
		return g.resume(ctx, c, q.Msg, rec)
	}
	return g.turn(ctx, c, q.Msg, g.resolve(q.Msg), workTurnText(w))
}

// postOf is the reply that posts w's Text, nil for none.
func postOf(w triggers.Work) *channels.Reply {
	if w.Text == "" {
		return nil
	}
	return &channels.Reply{Text: w.Text}
}

// saidBy is what w posts in its conversation (its post, or the thread's
// root it posted), written into the conversation's history so that a
// person replying there continues a conversation that knows the alert.
// It is the trigger's, not the model's: a user message with the post as
// untrusted data, since its labels and summaries are the sender's words.
func saidBy(w triggers.Work) []sessions.Message {
	var out []sessions.Message
	for _, text := range []string{w.Posted, w.Text} {
		if text != "" {
			out = append(out, sessions.Message{Role: "user", Content: w.Trigger + " posted in this chat:\n\n" + agent.WrapToolResult(w.Trigger, text)})
		}
	}
	return out
}

// workTurnText is the user turn of an agent work: the skill first, the
// request, then the payload as untrusted data.
func workTurnText(w triggers.Work) string {
	var b strings.Builder
	if w.Skill != "" {
		b.WriteString("/skill:" + w.Skill + " ")
	}
	b.WriteString(w.Prompt)
	if w.Data != "" {
		b.WriteString("\n\n")
		b.WriteString(agent.WrapToolResult(w.Trigger, w.Data))
	}
	return b.String()
}

// threadWork finds (or starts, posting w's Text as its root) the thread
// of w's group and queues w again in that thread's conversation. It runs
// under the chat's lock, so the group's work is served one at a time and
// gets one thread.
func (g *Gateway) threadWork(ctx context.Context, c *sessions.Claim, q queued) next {
	w := *q.Work
	if w.EditRoot != "" {
		return g.editRoot(ctx, c, q)
	}
	th, ok, err := g.cfg.Threads.Get(ctx, w.To, w.Group)
	if err != nil {
		g.release(c.Lock)
		g.redisFailed()
		return next{failed: true}
	}
	if !ok {
		root, posted, retryIn := g.postRoot(ctx, q)
		switch {
		case retryIn > 0:
			g.release(c.Lock)
			return next{retryIn: retryIn}
		case !posted:
			return g.finish(ctx, c, q, result{}) // counted and logged: dropped
		case root == "":
			// The platform names no post, so there is no thread to
			// answer in: the work goes on in the chat.
			w.Group = ""
			return g.requeue(ctx, c, q, w)
		}
		th = triggers.Thread{Root: root, Creator: w.ID, Resolved: w.Resolved}
	}
	if th.Creator == w.ID {
		// It is the thread's root: posted, to be recorded in the thread.
		w.Posted, w.Text = w.Text, ""
	} else if th.Resolved != w.Resolved {
		// Queued before the state is recorded: tried again after a
		// crash in between, the edit is a duplicate of itself.
		if err := g.queueRootEdit(ctx, w, th.Root); err != nil {
			g.log.WarnContext(ctx, "queue the edit of an alert group's root; trying again", "trigger", w.Trigger, "err", err)
			g.release(c.Lock)
			return next{failed: true}
		}
		th.Resolved = w.Resolved
	}
	ttl := triggers.OpenThreadTTL
	if w.Resolved {
		ttl = triggers.ResolvedThreadTTL
	}
	if err := g.cfg.Threads.Set(ctx, w.To, w.Group, th, ttl); err != nil {
		g.log.WarnContext(ctx, "record an alert group's thread", "trigger", w.Trigger, "err", err)
		g.release(c.Lock)
		g.redisFailed()
		return next{failed: true}
	}
	w.To.Thread, w.ID = th.Root, w.ID+":thread"
	return g.requeue(ctx, c, q, w)
}

// requeue queues w (derived from q's work) and removes q.
func (g *Gateway) requeue(ctx context.Context, c *sessions.Claim, q queued, w triggers.Work) next {
	if err := g.queueWork(ctx, w); err != nil {
		g.log.WarnContext(ctx, "queue a trigger's work in its thread; trying again", "trigger", w.Trigger, "err", err)
		g.release(c.Lock)
		return next{failed: true}
	}
	return g.finish(ctx, c, q, result{})
}

// postRoot posts the work's Text into its chat as the root of its group's
// thread and returns the root's id. A failure that may pass asks to be
// tried again after retryIn, until the outbox's max age has passed since
// the work arrived; past it, or for a failure that will not pass, the
// work is logged, counted and dropped (posted false).
func (g *Gateway) postRoot(ctx context.Context, q queued) (root string, posted bool, retryIn time.Duration) {
	m, w := q.Msg, *q.Work
	caps := g.capsOf(m)
	p := caps.PosterOf(m)
	if p == nil {
		return "", true, 0 // no thread can be named; see threadWork
	}
	parts := p.Parts(m, channels.Reply{Text: w.Text})
	if len(parts) == 0 {
		return "", true, 0
	}
	// The root is the first part; a longer text goes on in the thread.
	var err error
	if k := caps.KeyedPoster; k != nil {
		// Looked for first: an earlier try may have posted it and died
		// before the thread was recorded.
		root, err = k.PostKeyed(ctx, m, parts[0], "work:"+w.ID, true)
	} else {
		root, err = p.Post(ctx, m, parts[0])
	}
	if err == nil {
		g.metrics.RepliesSent.WithLabelValues(m.Channel, metrics.OutcomeOK).Inc()
		return root, true, 0
	}
	again, after := channels.Retryable(err)
	if again && time.Since(m.Received) < g.workMaxAge() {
		g.log.WarnContext(ctx, "cannot post a trigger's thread root; trying again", "trigger", w.Trigger, "channel", m.Channel, "err", err)
		return "", false, min(max(after, g.cfg.RetryMax), workRetryMax)
	}
	g.metrics.RepliesSent.WithLabelValues(m.Channel, metrics.OutcomeError).Inc()
	g.log.ErrorContext(ctx, "cannot post a trigger's thread root; the work is dropped", "trigger", w.Trigger, "channel", m.Channel,
		"retryable", again, "err", err)
	return "", false, 0
}

// workMaxAge is how long a root post is tried: the outbox's max age.
func (g *Gateway) workMaxAge() time.Duration {
	if g.cfg.WorkMaxAge > 0 {
		return g.cfg.WorkMaxAge
	}
	return config.DefaultOutboxMaxAge
}
