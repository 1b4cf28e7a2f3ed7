package delivery

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/tracing"
)

// Live feeds a channel's ReplySink with the events of one turn. The
// agent hands events over without waiting; one goroutine shows them in
// order, and text that arrives while the sink is busy (a platform call in
// flight) is merged into one piece, so that a slow platform never slows
// the turn and a fast model never queues up edits.
type Live struct {
	sink channels.ReplySink
	msg  channels.Message
	d    *Deliverer
	// claim is the turn's (nil: none; nothing is recorded); adopted: the
	// sink is a reply an earlier attempt at the message showed and did
	// not finish (see adopt), which shows no progress of this turn.
	claim   *sessions.Claim
	adopted bool
	// hold is how long the pump shows nothing at first (Config.FirstShow;
	// none for an adopted reply, which is already shown).
	hold time.Duration
	// recorded is the reference last recorded with the turn, "" when
	// none; written by the pump, read once it has stopped.
	recorded string
	// maybeRecorded: a record's write failed in a way that may have
	// written it.
	maybeRecorded bool

	// typing is the channel's typing indicator, shown once the hold passes
	// with nothing to show (see TypingWhenWaiting).
	typing typingOnWait

	mu sync.Mutex
	// visible is called once, when the user first sees progress (see
	// OnVisible); nil: nothing is.
	visible func()
	queue   []channels.Progress // not yet taken by the pump
	// textOut reports that text the pump took since the last reset it
	// took is shown (or being shown): a reset must then reach the sink.
	textOut bool
	wake    chan struct{}
	stopped chan struct{} // closed by stop
	done    chan struct{} // closed when the pump has returned
}

// StartLive starts the live reply to the route's message when its channel
// streams replies; nil otherwise, or when the channel cannot stream this
// one. c is the turn's claim (nil: none): when an earlier attempt at its
// message showed a live reply and died before finishing it, that reply is
// adopted instead, and finished with this turn's answer.
func (r Route) StartLive(ctx context.Context, c *sessions.Claim) *Live {
	if c != nil && c.LiveReply != "" {
		if l := r.adopt(ctx, c); l != nil {
			return l
		}
	}
	if r.caps == nil || r.caps.Streamer == nil {
		return nil
	}
	m, d := r.m, r.d
	sink, err := r.caps.Streamer.StartReply(ctx, m)
	if err != nil {
		d.cfg.Log.WarnContext(ctx, "cannot start a live reply; the answer is sent when complete", "channel", m.Channel, "err", err)
		return nil
	}
	if sink == nil {
		return nil
	}
	return r.live(ctx, sink, c, r.d.cfg.FirstShow)
}

// live starts showing through sink, after hold.
func (r Route) live(ctx context.Context, sink channels.ReplySink, c *sessions.Claim, hold time.Duration) *Live {
	l := &Live{
		sink: sink, msg: r.m, d: r.d, claim: c, hold: hold,
		wake:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
		done:    make(chan struct{}),
	}
	go l.pump(ctx)
	return l
}

// adopt is the live reply c records, left by an earlier attempt at its
// message, for this turn to finish; nil when the channel cannot adopt it
// (then it stays beside the answer, which is logged).
func (r Route) adopt(ctx context.Context, c *sessions.Claim) *Live {
	log := r.d.cfg.Log
	if r.caps == nil || r.caps.LiveAdopter == nil {
		log.WarnContext(ctx, "an earlier attempt's live reply cannot be finished by this channel; it stays beside the answer", "channel", r.m.Channel)
		return nil
	}
	sink, err := r.caps.LiveAdopter.AdoptReply(ctx, r.m, c.LiveReply)
	if err != nil {
		log.WarnContext(ctx, "an earlier attempt's live reply is not this channel's; it is left alone", "channel", r.m.Channel, "err", err)
		return nil
	}
	log.InfoContext(ctx, "an earlier attempt at this message left its live reply unfinished; this turn's answer finishes it", "channel", r.m.Channel)
	l := r.live(ctx, sink, c, 0)
	l.adopted, l.recorded = true, c.LiveReply
	return l
}

// Events is the agent's event listener for the turn; nil without a live
// reply, so the agent does not report.
func (l *Live) Events() func(agent.Event) {
	if l == nil || l.adopted {
		return nil
	}
	return l.event
}

// OnVisible has f called once, from the goroutine that shows the reply,
// when the user first sees it: the turn then clears its typing indicator,
// which the visible answer makes redundant (and which, not yet shown,
// costs no platform call at all). Safe on a nil reply, which calls
// nothing.
func (l *Live) OnVisible(f func()) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.visible = f
	l.mu.Unlock()
}

// event queues one agent event for the sink, merging it with what waits.
func (l *Live) event(e agent.Event) {
	l.mu.Lock()
	switch e.Kind {
	case agent.EventText:
		if n := len(l.queue); n > 0 && l.queue[n-1].Kind == channels.ProgressText {
			l.queue[n-1].Text += e.Text
		} else {
			l.queue = append(l.queue, channels.Progress{Kind: channels.ProgressText, Text: e.Text})
		}
	case agent.EventReset:
		l.withdrawText()
	case agent.EventTool:
		// A tool's progress comes as often as its server sends it: only
		// the newest status that waits is worth a platform call.
		if n := len(l.queue); n > 0 && l.queue[n-1].Kind == channels.ProgressTool {
			l.queue[n-1].Name = e.Name
		} else {
			l.queue = append(l.queue, channels.Progress{Kind: channels.ProgressTool, Name: e.Name})
		}
	case agent.EventSkill:
		l.queue = append(l.queue, channels.Progress{Kind: channels.ProgressSkill, Name: e.Name})
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// withdrawText drops the queued text, never to be shown, and queues a
// reset when text the pump took is out (only that can have left a reset
// in the queue, so it takes the place of any). l.mu is held.
func (l *Live) withdrawText() {
	kept := l.queue[:0]
	for _, p := range l.queue {
		if p.Kind != channels.ProgressText && p.Kind != channels.ProgressReset {
			kept = append(kept, p)
		}
	}
	l.queue = kept
	if l.textOut {
		l.queue = append(l.queue, channels.Progress{Kind: channels.ProgressReset})
	}
}

// pump shows the queued progress until stop, once the hold is over.
func (l *Live) pump(ctx context.Context) {
	defer close(l.done)
	if !l.waitHold() {
		return
	}
	failed, seen := false, false
	for {
		select {
		case <-l.stopped:
			return
		case <-l.wake:
		}
		l.mu.Lock()
		batch := l.queue
		l.queue = nil
		for _, p := range batch {
			switch p.Kind {
			case channels.ProgressText:
				l.textOut = true
			case channels.ProgressReset:
				l.textOut = false
			}
		}
		l.mu.Unlock()
		for _, p := range batch {
			if failed || l.leftToAnother() {
				break
			}
			visible, err := l.sink.Show(ctx, p)
			l.record(ctx)
			if err != nil {
				// The final reply still comes, through Finish or Send.
				failed = true
				l.d.cfg.Log.WarnContext(ctx, "live reply stopped showing progress; the answer is sent when complete", "channel", l.msg.Channel, "err", err)
				continue
			}
			if visible && !seen {
				seen = true
				l.d.firstVisible(ctx, l.msg)
				l.mu.Lock()
				f := l.visible
				l.visible = nil
				l.mu.Unlock()
				if f != nil {
					f()
				}
			}
		}
	}
}

// waitHold waits out the hold, in which nothing is shown: most answers
// of a fast model are complete by then and are posted whole, which costs
// one platform call where a stream costs two or three. A turn that
// outlasts it with nothing queued tells the sink it is still at work.
// It reports false when the reply stopped first.
func (l *Live) waitHold() bool {
	if l.hold <= 0 {
		return true
	}
	t := time.NewTimer(l.hold)
	defer t.Stop()
	select {
	case <-l.stopped:
		return false
	case <-t.C:
	}
	l.mu.Lock()
	waiting := len(l.queue) == 0
	if waiting {
		l.queue = append(l.queue, channels.Progress{Kind: channels.ProgressWaiting})
	}
	l.mu.Unlock()
	if waiting {
		l.typing.show()
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return true
}

// Holds reports whether the reply shows nothing at first (Config.
// FirstShow): the turn's typing indicator then waits for the hold too
// (TypingWhenWaiting). False on a nil reply.
func (l *Live) Holds() bool { return l != nil && l.hold > 0 }

// TypingWhenWaiting has start, which shows the channel's typing indicator
// and returns what clears it, called when the hold passes with nothing to
// show: a turn answered sooner, or already showing its answer, shows no
// indicator at all. The returned stop clears one that was shown and
// keeps one from being shown; it may be called any number of times.
// Without a hold, start is called at once. Safe on a nil reply, which
// calls start at once.
func (l *Live) TypingWhenWaiting(start func() (clear func())) (stop func()) {
	if l == nil || l.hold <= 0 {
		clear := start()
		var once sync.Once
		return func() { once.Do(clear) }
	}
	l.typing.set(start)
	return l.typing.stop
}

// typingOnWait is a typing indicator shown only when the live reply's hold
// passes with nothing to show.
type typingOnWait struct {
	mu      sync.Mutex
	start   func() func()
	clear   func()
	stopped bool
}

func (t *typingOnWait) set(start func() func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.start = start
}

// show shows the indicator unless it was stopped first. The lock is held
// across start, so that a stop waits for it and clears what it showed.
func (t *typingOnWait) show() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.start != nil && !t.stopped {
		t.clear = t.start()
	}
}

func (t *typingOnWait) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.stopped = true
	if t.clear != nil {
		t.clear()
	}
}

// record records what the sink shows with the turn, when that changed:
// one write when the reply first shows, and one for each message it adds
// later (a stream rolling over), not one per piece of text. A failure is
// logged; the next Show tries again.
func (l *Live) record(ctx context.Context) {
	rs, ok := l.sink.(channels.Referenced)
	if !ok || l.claim == nil || l.d.cfg.Replies == nil {
		return
	}
	ref := rs.Reference()
	if ref == "" || ref == l.recorded {
		return
	}
	if err := l.d.cfg.Replies.RecordLiveReply(ctx, l.claim.Lock, l.claim.Item, ref); err != nil {
		l.d.cfg.Log.WarnContext(ctx, "cannot record the live reply with its turn; should this process stop, it stays beside the answer", "channel", l.msg.Channel, "err", err)
		// A write whose answer was lost (Redis cut off as it ran) may
		// have recorded it: another holder may finish this reply.
		l.maybeRecorded = l.maybeRecorded || !errors.Is(err, sessions.ErrLockLost)
		return
	}
	l.recorded = ref
}

// leftToAnother reports whether the reply is recorded and its turn's lock
// may be another's by now: that holder finishes the reply, so this one
// must not touch it again (a withdrawn attempt, say, would delete the
// message the other has just completed). Called by the pump, or once it
// has stopped.
func (l *Live) leftToAnother() bool {
	return (l.recorded != "" || l.maybeRecorded) && l.claim.Lock.MayBeAnothers()
}

// stop ends the pump, waiting for a Show in flight; progress still queued
// is dropped, since the final reply (or the discard) replaces it.
func (l *Live) stop() {
	select {
	case <-l.stopped:
	default:
		close(l.stopped)
	}
	<-l.done
}

// posts reports whether the reply will be posted rather than shown by the
// sink: the sink says nothing of it was shown (channels.Unshown). The pump
// is stopped first, so that nothing is shown after the answer; Finish,
// which would stop it, follows the turn's completion at once.
func (l *Live) posts() bool {
	u, ok := l.sink.(channels.Unshown)
	if !ok {
		return false
	}
	l.stop()
	return u.Unshown()
}

// finish hands the final reply to the sink; false when the sink could not
// deliver it, and it is to be sent with Send.
func (l *Live) finish(ctx context.Context, r channels.Reply) bool {
	l.stop()
	if err := l.sink.Finish(ctx, r); err != nil {
		// Nothing shown (the model answered in one piece) is the usual
		// case where the workspace allows edits only: not worth a warning
		// on every answer.
		if !errors.Is(err, channels.ErrNotShown) {
			l.d.cfg.Log.WarnContext(ctx, "live reply could not deliver the answer; sending it plainly", "channel", l.msg.Channel, "err", err)
		}
		return false
	}
	return true
}

// Discard removes what the live reply showed. Safe on a nil reply. A
// recorded reply whose turn's lock may be another's by now is left to
// that holder, which finishes it: removing it could remove its answer.
func (l *Live) Discard(ctx context.Context) {
	if l == nil {
		return
	}
	l.stop()
	if l.leftToAnother() {
		l.d.cfg.Log.WarnContext(ctx, "the conversation's lock may be another's; its live reply is left for that holder to finish", "channel", l.msg.Channel)
		return
	}
	if err := l.sink.Discard(ctx); err != nil {
		l.d.cfg.Log.WarnContext(ctx, "could not remove a live reply", "channel", l.msg.Channel, "err", err)
	}
}

// firstVisible records that the reply to m became visible, timed from
// the message's arrival (parley_reply_first_visible_seconds).
func (d *Deliverer) firstVisible(ctx context.Context, m channels.Message) {
	after := time.Since(m.Received)
	tracing.Observe(ctx, d.cfg.Metrics.ReplyFirstVisible.WithLabelValues(m.Channel), after.Seconds())
	d.cfg.Log.DebugContext(ctx, "reply visible", "channel", m.Channel, "after", after)
}
