// Package outbox makes the delivery of replies durable and paced. A reply is posted
// part by part through its channel's channels.Poster; when a post fails
// for a reason that may pass (a 5xx, a rate limit, a dropped connection,
// a shutdown), the reply — with the ids of the parts already posted — goes
// to an outbox in Redis, and whichever replica is alive tries it again with
// backoff until it is delivered or MaxAge has passed, when it is counted
// as failed. Nothing is dropped without being counted and logged.
//
// Posts to one chat are paced to its platform's published rate over every
// replica (see pacer), and a 429's Retry-After holds the chat for all of
// them.
//
// Nothing is posted twice either: a replica claims an item for a lease
// before trying it, records each part it posts (with the platform's
// message id) under that claim, and the last part's record finishes the
// item in the same Redis step. A replica that dies mid-delivery leaves its
// claim to expire; the next claim resumes at the first part not recorded.
// Each attempt ends before its lease does, so two replicas never post
// the same item at once. A platform that posts a message and then fails
// to answer could leave a part twice: where the channel can find a post
// again by its key (channels.KeyedPoster), the next try looks first.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/retry"
	"github.com/parleyhq/parley/sessions"
)

// Defaults of Config's zero fields.
const (
	DefaultMaxAge         = config.DefaultOutboxMaxAge
	DefaultLease          = 30 * time.Second
	DefaultPoll           = time.Second
	DefaultMinWait        = time.Second
	DefaultMaxWait        = time.Minute
	DefaultInlineAttempts = 3
)

// Config shapes an Outbox. The zero value takes the defaults.
type Config struct {
	// MaxAge is how long a reply is tried before it is counted as failed,
	// from its first failure.
	MaxAge time.Duration
	// Lease is how long a claim of an item lasts; an attempt stops before
	// it ends. A dead replica's item is tried again after at most a lease.
	Lease time.Duration
	// Poll is how often a replica looks for due items.
	Poll time.Duration
	// MinWait and MaxWait bound the backoff between tries of one item.
	MinWait, MaxWait time.Duration
	// InlineAttempts is how many times each part is tried when the reply
	// is first sent, before the reply goes to the outbox.
	InlineAttempts int
	// Pace replaces a platform's own posting rate (channels.Poster's
	// Pace), by channel name: for a workspace granted more, or a test.
	Pace map[string]channels.Pace
	// Files reads the kept files that file items send (nil: a file item
	// finds none, and its user is told so in text).
	Files Files
}

// Files reads a conversation's kept files: sessions.RedisStore.
type Files interface {
	Attachment(ctx context.Context, conv, id string) (sessions.KeptFile, error)
}

func (c Config) withDefaults() Config {
	if c.MaxAge <= 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.MinWait <= 0 {
		c.MinWait = DefaultMinWait
	}
	if c.MaxWait < c.MinWait {
		c.MaxWait = max(DefaultMaxWait, c.MinWait)
	}
	if c.InlineAttempts <= 0 {
		c.InlineAttempts = DefaultInlineAttempts
	}
	return c
}

// Outbox delivers replies and keeps those that could not be delivered.
// It is safe for concurrent use.
type Outbox struct {
	cfg   Config
	store *store
	pace  *pacer
	m     *metrics.Metrics
	log   *slog.Logger

	mu       sync.Mutex
	retriers map[string]*retry.Retrier // by channel
}

// New returns an Outbox keeping its items in client under prefix (the
// store's key prefix). m nil counts into a private registry; log nil
// discards.
func New(client redis.UniversalClient, prefix string, cfg Config, m *metrics.Metrics, log *slog.Logger) *Outbox {
	if m == nil {
		m = metrics.New()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Outbox{cfg: cfg.withDefaults(), store: newStore(client, prefix), pace: &pacer{client: client, prefix: prefix}, m: m,
		log: log.With("component", "outbox"), retriers: map[string]*retry.Retrier{}}
}

// retrier is the retry loop of posts to channel.
func (o *Outbox) retrier(channel string) *retry.Retrier {
	o.mu.Lock()
	defer o.mu.Unlock()
	r, ok := o.retriers[channel]
	if !ok {
		r = retry.New(channel, retry.Policy{Attempts: o.cfg.InlineAttempts, MinWait: o.cfg.MinWait / 2, MaxWait: 4 * o.cfg.MinWait}, o.m, o.log)
		o.retriers[channel] = r
	}
	return r
}

// Deliver posts r, answering m, through p. A reply that fails for a reason
// that may pass (also this replica shutting down) is queued and nil is
// returned: the outbox delivers it later. The error is a failure that will
// not pass (the chat is gone, the token refused) or an outbox Redis cannot
// keep; either is counted as a failed delivery and logged.
func (o *Outbox) Deliver(ctx context.Context, p channels.Poster, m channels.Message, r channels.Reply) error {
	return o.DeliverReserved(ctx, p, m, r, nil)
}

// DeliverReserved is Deliver with the first post's place in the chat's
// pace reserved ahead (Reserve); slot nil reserves it now, as Deliver.
func (o *Outbox) DeliverReserved(ctx context.Context, p channels.Poster, m channels.Message, r channels.Reply, slot *Slot) error {
	it := &Item{ID: newToken(), Message: m, Parts: p.Parts(m, r)}
	if len(it.Parts) == 0 {
		return nil
	}
	return o.deliver(ctx, p, it, slot)
}

// DeliverFile sends the kept file ref names into m's thread through p
// (its channels.Uploader; a note in text where it has none), as an item
// of its own: tried again like a reply, by any replica, and never
// uploaded twice. key names the file's delivery, the same on every
// attempt at the turn that sends it (its item id, and the file's).
func (o *Outbox) DeliverFile(ctx context.Context, p channels.Poster, m channels.Message, key string, ref FileRef) error {
	return o.deliver(ctx, p, &Item{ID: key, Message: m, Parts: []string{""}, File: &ref}, nil)
}

// deliver posts it inline, then queues what is left of it.
func (o *Outbox) deliver(ctx context.Context, p channels.Poster, it *Item, slot *Slot) error {
	m := it.Message
	err := o.postAll(ctx, p, it, o.cfg.InlineAttempts, slot, nil)
	if err == nil {
		o.m.Deliveries.WithLabelValues(m.Channel, metrics.DeliverySent).Inc()
		return nil
	}
	if permanent(err) && ctx.Err() == nil {
		o.failed(ctx, it, err)
		o.tellFileFailed(ctx, p, it)
		return err
	}
	_, after := channels.Retryable(err)
	// A shutdown leaves the reply to another replica too: the outbox
	// outlives this one.
	if qerr := o.store.add(context.WithoutCancel(ctx), it, max(after, retry.Jitter(o.cfg.MinWait))); qerr != nil {
		err = errors.Join(err, qerr)
		o.failed(ctx, it, err)
		o.tellFileFailed(ctx, p, it)
		return err
	}
	o.m.Deliveries.WithLabelValues(m.Channel, metrics.DeliveryRetried).Inc()
	o.log.WarnContext(ctx, "reply not delivered; queued in the outbox", "channel", m.Channel, "item", it.ID,
		"parts_posted", len(it.Sent), "parts", len(it.Parts), "err", err)
	o.refreshPending(context.WithoutCancel(ctx))
	return nil
}

// failed counts and logs a reply given up: its user cannot be told, since
// the channel itself is what failed.
func (o *Outbox) failed(ctx context.Context, it *Item, err error) {
	o.m.Deliveries.WithLabelValues(it.Channel(), metrics.DeliveryFailed).Inc()
	o.log.ErrorContext(ctx, "reply could not be delivered; giving up", "channel", it.Channel(), "item", it.ID,
		"parts_posted", len(it.Sent), "parts", len(it.Parts), "posted_ids", it.Sent, "attempts", it.Attempts, "err", err)
}

// postAll posts the parts of it not yet posted, in order, each tried up
// to attempts times. slot, when not nil, is the first post's reserved
// place in the pace. recorded, when set, is called with each part's id
// and keeps it.Sent; otherwise the id is appended here. It is set for an
// item from the store, whose first part not recorded was tried before.
func (o *Outbox) postAll(ctx context.Context, p channels.Poster, it *Item, attempts int, slot *Slot, recorded func(id string) error) error {
	tried := recorded != nil
	for len(it.Sent) < len(it.Parts) {
		n := len(it.Sent)
		var id string
		err := o.retrier(it.Channel()).WithAttempts(attempts).Do(ctx, "post reply", func(ctx context.Context) (bool, time.Duration, error) {
			if err := o.waitSlot(ctx, it.Message, p, slot); err != nil {
				if ctx.Err() != nil {
					return false, 0, err
				}
				// Unpaced is better than undelivered.
				o.log.DebugContext(ctx, "cannot pace a post; posting anyway", "channel", it.Channel(), "err", err)
			}
			slot = nil // a retry, or the next part, takes a slot of its own
			var err error
			id, err = o.post(ctx, p, it, n, tried)
			tried = true
			if err == nil {
				return false, 0, nil
			}
			again, after := channels.Retryable(err)
			if after > 0 {
				// Every replica posting to this chat waits, not this one alone.
				if herr := o.pace.hold(context.WithoutCancel(ctx), it.Message, after); herr != nil {
					o.log.DebugContext(ctx, "cannot hold a rate-limited chat", "channel", it.Channel(), "err", herr)
				}
			}
			return again, after, err
		})
		if err != nil {
			return fmt.Errorf("outbox: part %d of %d: %w", n+1, len(it.Parts), err)
		}
		tried = false
		if recorded == nil {
			it.Sent = append(it.Sent, id)
			continue
		}
		if err := recorded(id); err != nil {
			return err
		}
	}
	return nil
}

// post makes one try at part n of it: marked with the part's delivery id
// (the item's id and the part's index, the same on every replica) where
// the channel can find a post again (channels.KeyedPoster), so that a try
// after one that may have been posted looks for it first.
func (o *Outbox) post(ctx context.Context, p channels.Poster, it *Item, n int, again bool) (string, error) {
	if it.File != nil {
		return o.postFile(ctx, p, it, again)
	}
	if kp, ok := p.(channels.KeyedPoster); ok {
		return kp.PostKeyed(ctx, it.Message, it.Parts[n], it.ID+"."+strconv.Itoa(n), again)
	}
	return p.Post(ctx, it.Message, it.Parts[n])
}

// unknownChannel is the channel label of an item whose channel cannot be
// read.
const unknownChannel = "unknown"

// paceOf is the posting rate of channel's chats.
func (o *Outbox) paceOf(channel string, p channels.Poster) channels.Pace {
	if pace, ok := o.cfg.Pace[channel]; ok {
		return pace
	}
	return p.Pace()
}

// Run tries due items until ctx ends, one at a time; posters names the
// adapter of each platform and account by channels.AdapterKey (nil when
// this replica has none by that key).
func (o *Outbox) Run(ctx context.Context, posters func(channel string) channels.Poster) {
	var failing bool
	for ctx.Err() == nil {
		it, wait, now, err := o.store.claim(ctx, o.cfg.Lease)
		switch {
		case errors.Is(err, errUndecodable):
			// Never tried, never retried: it would come due again forever.
			o.log.Error("dropping an undecodable outbox item", "item", it.ID, "err", err)
			o.m.Deliveries.WithLabelValues(unknownChannel, metrics.DeliveryFailed).Inc()
			if ferr := o.store.fail(context.WithoutCancel(ctx), it, "undecodable"); ferr != nil {
				o.log.Warn("cannot mark an outbox item failed", "item", it.ID, "err", ferr)
			}
			continue
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			if !failing { // once per outage, not every poll
				o.log.Warn("cannot read the outbox; trying again", "err", err)
			}
			failing, wait = true, o.cfg.Poll
		case it != nil:
			failing = false
			o.attempt(ctx, it, now, posters(channels.AdapterKey(it.Message.Channel, it.Message.Account)))
			o.refreshPending(ctx)
			continue
		default:
			failing = false
			o.refreshPending(ctx)
			if wait <= 0 || wait > o.cfg.Poll {
				wait = o.cfg.Poll
			}
		}
		if !retry.Sleep(ctx, wait) {
			return
		}
	}
}

// attempt tries one claimed item: past MaxAge it fails; otherwise its
// remaining parts are posted, each recorded under the claim, and a failure
// that may pass makes it due again after a backoff.
func (o *Outbox) attempt(ctx context.Context, it *Item, now time.Time, p channels.Poster) {
	log := o.log.With("channel", it.Channel(), "item", it.ID, "attempt", it.Attempts)
	if age := now.Sub(it.Created); age > o.cfg.MaxAge {
		if o.finishFailed(ctx, it, "max_age", fmt.Errorf("outbox: not delivered within %s", o.cfg.MaxAge)) && p != nil {
			o.tellFileFailed(ctx, p, it)
		}
		return
	}
	if p == nil {
		// A replica without the channel leaves the item to one with it.
		log.Warn("no channel on this replica for an item of the outbox")
		o.release(ctx, it, o.cfg.Poll)
		return
	}
	// The attempt ends before the lease would, so that no other replica
	// claims the item while a post of this one is in flight.
	actx, cancel := context.WithTimeout(ctx, o.cfg.Lease*3/4)
	defer cancel()
	delivered := false
	err := o.postAll(actx, p, it, 1, nil, func(id string) error {
		// The post happened: record it even when ctx has just ended.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		done, err := o.store.posted(rctx, it, id, o.cfg.Lease)
		delivered = done
		return err
	})
	switch {
	case err == nil && delivered:
		o.m.Deliveries.WithLabelValues(it.Channel(), metrics.DeliverySent).Inc()
		log.Info("reply delivered from the outbox", "parts", len(it.Parts), "posted_ids", it.Sent)
		return
	case err == nil:
		err = errors.New("outbox: every part posted but the item was not finished")
	case errors.Is(err, errLeaseLost):
		log.Warn("outbox item claimed by another replica mid-attempt; leaving it", "err", err)
		return
	}
	if ctx.Err() != nil {
		// Shutting down: hand the item to another replica now rather than
		// when the lease ends.
		o.release(ctx, it, 0)
		return
	}
	if permanent(err) && actx.Err() == nil {
		if o.finishFailed(ctx, it, retry.ReasonOf(err, 0).String(), err) {
			o.tellFileFailed(ctx, p, it)
		}
		return
	}
	_, after := channels.Retryable(err)
	delay := max(after, o.backoff(it.Attempts))
	// Never wait past the deadline: the failure is counted when it is due.
	delay = min(delay, it.Created.Add(o.cfg.MaxAge).Sub(now)+time.Millisecond)
	o.m.Deliveries.WithLabelValues(it.Channel(), metrics.DeliveryRetried).Inc()
	log.Warn("reply from the outbox not delivered; trying again later", "retry_in", delay,
		"parts_posted", len(it.Sent), "parts", len(it.Parts), "err", err)
	o.release(ctx, it, delay)
}

// permanent reports whether err is a post the platform refused for good
// (a deleted chat, a refused token). Anything else — a 5xx, a rate limit,
// Redis failing to record a post — may pass, and is tried again until
// MaxAge.
func permanent(err error) bool {
	var pe *channels.PostError
	return errors.As(err, &pe) && !pe.Retry
}

// backoff is the wait after the n-th failed claim of an item.
func (o *Outbox) backoff(n int) time.Duration {
	d := o.cfg.MinWait
	for i := 1; i < n && d < o.cfg.MaxWait; i++ {
		d *= 2
	}
	return retry.Jitter(min(d, o.cfg.MaxWait))
}

func (o *Outbox) release(ctx context.Context, it *Item, delay time.Duration) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := o.store.release(rctx, it, delay); err != nil {
		o.log.Warn("cannot give an outbox item back; it is tried again when its lease ends", "item", it.ID, "err", err)
	}
}

// finishFailed ends a claimed item as failed; why is a bounded reason
// (max_age, or the retry reason of the last failure), kept with the item.
// It reports whether this replica ended it.
func (o *Outbox) finishFailed(ctx context.Context, it *Item, why string, err error) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if ferr := o.store.fail(rctx, it, why); ferr != nil {
		if errors.Is(ferr, errLeaseLost) {
			return false // another replica holds it now, and decides
		}
		o.log.Warn("cannot mark an outbox item failed; it is tried again when its lease ends", "item", it.ID, "err", ferr)
		return false
	}
	o.failed(ctx, it, err)
	return true
}

// refreshPending sets parley_outbox_pending from Redis: every replica
// reports the same shared count.
func (o *Outbox) refreshPending(ctx context.Context) {
	if n, err := o.store.pending(ctx); err == nil {
		o.m.OutboxPending.Set(float64(n))
	}
}

// Lookup reads what the outbox keeps of item id: while it is pending, and
// for a day after it finished. ok is false when it keeps nothing.
func (o *Outbox) Lookup(ctx context.Context, id string) (Record, bool, error) {
	return o.store.lookup(ctx, id)
}
