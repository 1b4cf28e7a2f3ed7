package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway/outbox"
	"github.com/parleyhq/parley/gateway/upload"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/retry"
	"github.com/parleyhq/parley/sessions"
)

// A turn's files go out after its answer, in the answer's thread, each
// once: through the outbox where the channel posts through it (an item of
// its own, naming the kept file rather than holding its bytes, retried by
// any replica), else uploaded here with a few tries. Every try of one
// file carries the same key, so that a try after one that may have
// reached the platform finds the file instead of sending it again.

// uploadPolicy is the tries of an upload made here, without the outbox.
var uploadPolicy = retry.Policy{Attempts: 3, MinWait: 500 * time.Millisecond, MaxWait: 4 * time.Second}

// SendFile sends the kept file ref names into the thread of the route's
// message; key names its delivery, the same on every attempt (the turn's
// item and the file's id). A chat that cannot take it gets its caption
// and a note in text; a file given up is told in text too.
func (r Route) SendFile(ctx context.Context, key string, ref outbox.FileRef) {
	d := r.d
	ctx, span := d.cfg.Tracer.Start(ctx, "send_file")
	defer span.End()
	if r.poster != nil {
		// The outbox counts, retries and tells what it gives up.
		_ = d.cfg.Outbox.DeliverFile(ctx, r.poster, r.m, key, ref)
		return
	}
	if r.caps == nil || r.caps.Channel == nil {
		d.cfg.Log.ErrorContext(ctx, "no channel registered for a file", "channel", r.m.Channel)
		d.cfg.Metrics.FilesSent.WithLabelValues(r.m.Channel, metrics.FileFailed).Inc()
		return
	}
	ready, err := r.readyFile(ctx, ref)
	if err != nil {
		d.cfg.Log.WarnContext(ctx, "cannot read a file to send", "channel", r.m.Channel, "file", ref.ID, "err", err)
		d.cfg.Metrics.FilesSent.WithLabelValues(r.m.Channel, metrics.FileFailed).Inc()
		r.Send(ctx, channels.Reply{Notice: true, Text: upload.Failed(ref.Caption, ref.ID)})
		return
	}
	if ready.Note != "" {
		d.cfg.Metrics.FilesSent.WithLabelValues(r.m.Channel, ready.Outcome).Inc()
		r.Send(ctx, channels.Reply{Notice: true, Text: ready.Note})
		return
	}
	again := false
	var id string
	err = d.uploads.Do(ctx, "upload file", func(ctx context.Context) (bool, time.Duration, error) {
		var err error
		id, err = r.caps.Uploader.Upload(ctx, r.m, ready.File, key, again)
		again = true
		if err == nil {
			return false, 0, nil
		}
		retryable, after := channels.Retryable(err)
		return retryable, after, err
	})
	if err != nil {
		d.cfg.Log.ErrorContext(ctx, "file not sent; giving up", "channel", r.m.Channel, "file", ref.ID, "err", err)
		d.cfg.Metrics.FilesSent.WithLabelValues(r.m.Channel, metrics.FileFailed).Inc()
		r.Send(ctx, channels.Reply{Notice: true, Text: upload.Failed(ref.Caption, ready.File.Name)})
		return
	}
	d.cfg.Metrics.FilesSent.WithLabelValues(r.m.Channel, metrics.FileSent).Inc()
	d.cfg.Metrics.FilesSentBytes.WithLabelValues(r.m.Channel).Add(float64(len(ready.File.Data)))
	d.cfg.Log.InfoContext(ctx, "file sent", "channel", r.m.Channel, "file", ref.ID, "type", ready.File.Type, "bytes", len(ready.File.Data), "id", id)
}

// readyFile reads the kept file and makes it ready for the route's chat.
func (r Route) readyFile(ctx context.Context, ref outbox.FileRef) (upload.Ready, error) {
	if r.d.cfg.Files == nil {
		return upload.Gone(ref.Caption, ref.ID), nil
	}
	f, err := r.d.cfg.Files.Attachment(ctx, ref.Conversation, ref.ID)
	switch {
	case errors.Is(err, sessions.ErrNoAttachment):
		return upload.Gone(ref.Caption, ref.ID), nil
	case err != nil:
		return upload.Ready{}, err
	}
	up := r.caps.Uploader
	var lim channels.FileLimits
	if up != nil {
		lim = up.FileLimits(r.m)
	}
	return upload.Prepare(f, ref.Caption, lim, up != nil), nil
}

// CanSendFiles reports whether the route's chat takes files natively at
// all (an Uploader with a limit above zero): where it does not, send_file
// is not offered unless a policy sets files.send.
func (r Route) CanSendFiles() bool {
	if r.caps == nil || r.caps.Uploader == nil {
		return false
	}
	lim := r.caps.Uploader.FileLimits(r.m)
	return lim.MaxImage > 0 || lim.MaxFile > 0
}
