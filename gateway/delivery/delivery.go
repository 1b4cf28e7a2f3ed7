// Package delivery sends the gateway's replies by the one path a channel's
// capabilities allow: a live reply the channel shows while the answer is
// written (channels.Streamer), the outbox for a channel that posts part by
// part (channels.Poster: paced across replicas, retried by any replica,
// never a part twice), or the channel's plain Send. The path is chosen
// once per message, as a Route, and every reply to that message — the
// turn's answer, a notice, an approval prompt — goes through it.
package delivery

import (
	"context"
	"log/slog"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway/outbox"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/retry"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/tracing"
	"github.com/redis/go-redis/v9"
)

// Config names what delivery uses.
type Config struct {
	// Outbox delivers the replies of channels that post part by part; nil
	// sends every reply once, with Send.
	Outbox *outbox.Outbox
	// Replies records what a live reply shows with its turn, for the
	// conversation's next holder should this process stop mid-answer;
	// nil records nothing.
	Replies LiveReplies
	// FirstShow is how long a live reply shows nothing (the gateway's
	// typing delay): an answer complete by then is posted whole, one post
	// instead of a stream started and stopped, and a turn that outlasts
	// it with nothing to show yet tells its sink so
	// (channels.ProgressWaiting). Zero shows progress at once.
	FirstShow time.Duration
	// Files reads the kept files a turn sends (nil: none are found, and
	// their users are told so).
	Files   outbox.Files
	Tracer  tracing.Tracer
	Metrics *metrics.Metrics // not nil
	Log     *slog.Logger     // not nil
}

// LiveReplies records a live reply with its turn (sessions.Store's
// RecordLiveReply).
type LiveReplies interface {
	RecordLiveReply(ctx context.Context, lock *sessions.Lock, item []byte, ref string) error
}

// Deliverer chooses and runs the delivery of replies.
type Deliverer struct {
	cfg     Config
	uploads *retry.Retrier // the tries of files uploaded without the outbox
}

// New returns a Deliverer.
func New(cfg Config) *Deliverer {
	return &Deliverer{cfg: cfg, uploads: retry.New("upload", uploadPolicy, cfg.Metrics, cfg.Log)}
}

// Route is how the replies to one message are delivered, worked out once
// from its channel's capabilities. The zero Route is not usable; get one
// from For.
type Route struct {
	d    *Deliverer
	m    channels.Message
	caps *channels.Capabilities
	// poster is set when the replies go through the outbox.
	poster channels.Poster
}

// For is the route of the replies to m, whose channel has caps (nil: no
// channel is registered under m.Channel; every send fails and is logged).
func (d *Deliverer) For(caps *channels.Capabilities, m channels.Message) Route {
	r := Route{d: d, m: m, caps: caps}
	if caps != nil && d.cfg.Outbox != nil {
		r.poster = caps.PosterOf(m)
	}
	return r
}

// Chosen reports whether r came from For (the zero Route did not).
func (r Route) Chosen() bool { return r.d != nil }

// Message is the message the route answers.
func (r Route) Message() channels.Message { return r.m }

// Outboxed reports whether the route's posts go through the outbox.
func (r Route) Outboxed() bool { return r.poster != nil }

// Send sends reply once, with the channel's Send, counted and traced.
func (r Route) Send(ctx context.Context, reply channels.Reply) {
	d := r.d
	ctx, span := d.cfg.Tracer.Start(ctx, "send")
	defer span.End()
	outcome := metrics.OutcomeOK
	if r.caps == nil || r.caps.Channel == nil {
		d.cfg.Log.ErrorContext(ctx, "no channel registered for reply", "channel", r.m.Channel)
		outcome = metrics.OutcomeError
	} else if err := r.caps.Channel.Send(ctx, r.m, reply); err != nil {
		d.cfg.Log.ErrorContext(ctx, "send reply", "channel", r.m.Channel, "err", err)
		tracing.Fail(span, err)
		outcome = metrics.OutcomeError
	}
	d.cfg.Metrics.RepliesSent.WithLabelValues(r.m.Channel, outcome).Inc()
}

// Post sends reply through the outbox when the route has it, so that a
// post that fails is tried again (by any replica) and none is made twice;
// else as Send does. slot is the reservation Reserve made, or nil.
func (r Route) Post(ctx context.Context, reply channels.Reply, slot *outbox.Slot) {
	if r.poster == nil {
		r.Send(ctx, reply)
		return
	}
	d := r.d
	ctx, span := d.cfg.Tracer.Start(ctx, "send")
	defer span.End()
	outcome := metrics.OutcomeOK
	// A failure that may pass is queued and not an error here; the
	// outbox logs and counts what it gives up.
	if err := d.cfg.Outbox.DeliverReserved(ctx, r.poster, r.m, reply, slot); err != nil {
		tracing.Fail(span, err)
		outcome = metrics.OutcomeError
	}
	d.cfg.Metrics.RepliesSent.WithLabelValues(r.m.Channel, outcome).Inc()
}

// Deliver sends a turn's reply: the model's answer through live when
// there is one, a notice (or an answer live could not deliver) as Post
// does.
func (r Route) Deliver(ctx context.Context, reply channels.Reply, live *Live, slot *outbox.Slot) {
	if live != nil {
		if reply.Notice || reply.Failed {
			live.Discard(ctx)
		} else if r.finishLive(ctx, reply, live) {
			return
		}
	}
	r.Post(ctx, reply, slot)
}

// finishLive delivers reply through live, counted and traced as a send.
func (r Route) finishLive(ctx context.Context, reply channels.Reply, live *Live) bool {
	ctx, span := r.d.cfg.Tracer.Start(ctx, "send")
	defer span.End()
	if !live.finish(ctx, reply) {
		return false
	}
	r.d.cfg.Metrics.RepliesSent.WithLabelValues(r.m.Channel, "ok").Inc()
	return true
}

// Reserve is, for a reply the outbox will post, the reservation of its
// first post's place in its chat's pace, to ride in the pipeline of the
// turn's completion and set *slot: the post right after it then costs no
// round trip of its own. It is nil when there is no such reply: one a
// live reply may show instead, or none through the outbox.
func (r Route) Reserve(ctx context.Context, reply channels.Reply, live *Live, slot **outbox.Slot) sessions.Along {
	if r.poster == nil {
		return nil
	}
	if live != nil && !reply.Notice && !reply.Failed && !live.posts() {
		return nil
	}
	return func(pipe redis.Pipeliner) { *slot = r.d.cfg.Outbox.Reserve(ctx, pipe, r.poster, r.m) }
}

// Prompts reports whether the channel keeps a reference to the approval
// prompts it posts (channels.Prompter).
func (r Route) Prompts() bool { return r.caps != nil && r.caps.Prompter != nil }

// Prompt sends an approval prompt: through the channel's Prompter,
// returning the reference it gives (nil when none), or as Send does.
func (r Route) Prompt(ctx context.Context, reply channels.Reply) map[string]string {
	if !r.Prompts() {
		r.Send(ctx, reply)
		return nil
	}
	d := r.d
	ctx, span := d.cfg.Tracer.Start(ctx, "send")
	defer span.End()
	outcome := metrics.OutcomeOK
	ref, err := r.caps.Prompter.SendPrompt(ctx, r.m, reply)
	if err != nil {
		d.cfg.Log.ErrorContext(ctx, "send approval prompt", "channel", r.m.Channel, "err", err)
		tracing.Fail(span, err)
		outcome = metrics.OutcomeError
		ref = nil
	}
	d.cfg.Metrics.RepliesSent.WithLabelValues(r.m.Channel, outcome).Inc()
	return ref
}

// CountsPosts reports whether the channel may make several posts of one
// reply (a Poster, or a PostCounter), so that PostCount means something.
func (r Route) CountsPosts() bool {
	return r.caps != nil && (r.caps.PosterOf(r.m) != nil || r.caps.PostCounter != nil)
}

// PostCount is how many posts the channel makes of a reply's text, for
// the reply cap; call it only when CountsPosts. (A method, not a func
// returned, so that the reply cap's use of it allocates nothing.)
func (r Route) PostCount(text string) int {
	if p := r.caps.PosterOf(r.m); p != nil {
		return len(p.Parts(r.m, channels.Reply{Text: text}))
	}
	return r.caps.PostCounter.Posts(r.m, text)
}
