package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway/upload"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// postFile makes one try at a file item: the kept file read back from its
// conversation's store, made ready for the chat (upload.Prepare), and
// uploaded with the item's id as its key, so that a try after one that
// may have reached the platform finds it rather than sending it again.
// Where the chat takes no such file, or it is gone, its note is posted in
// text instead.
func (o *Outbox) postFile(ctx context.Context, p channels.Poster, it *Item, again bool) (string, error) {
	ref := it.File
	up, _ := p.(channels.Uploader)
	var ready upload.Ready
	f, err := o.readFile(ctx, ref)
	switch {
	case errors.Is(err, sessions.ErrNoAttachment):
		ready = upload.Gone(ref.Caption, ref.ID)
	case err != nil:
		return "", err // Redis: the next try reads it again
	default:
		var lim channels.FileLimits
		if up != nil {
			lim = up.FileLimits(it.Message)
		}
		ready = upload.Prepare(f, ref.Caption, lim, up != nil)
	}
	ch := it.Channel()
	if ready.Note != "" {
		id, err := o.postNote(ctx, p, it, ready.Note, again)
		if err == nil {
			o.m.FilesSent.WithLabelValues(ch, ready.Outcome).Inc()
		}
		return id, err
	}
	id, err := up.Upload(ctx, it.Message, ready.File, it.ID, again)
	if err != nil {
		return "", err
	}
	o.m.FilesSent.WithLabelValues(ch, metrics.FileSent).Inc()
	o.m.FilesSentBytes.WithLabelValues(ch).Add(float64(len(ready.File.Data)))
	o.log.InfoContext(ctx, "file sent", "channel", ch, "item", it.ID, "type", ready.File.Type, "bytes", len(ready.File.Data), "id", id)
	return id, nil
}

func (o *Outbox) readFile(ctx context.Context, ref *FileRef) (sessions.KeptFile, error) {
	if o.cfg.Files == nil {
		return sessions.KeptFile{}, sessions.ErrNoAttachment
	}
	return o.cfg.Files.Attachment(ctx, ref.Conversation, ref.ID)
}

// postNote posts a file's note in text, keyed where the channel can find
// a post again.
func (o *Outbox) postNote(ctx context.Context, p channels.Poster, it *Item, text string, again bool) (string, error) {
	if kp, ok := p.(channels.KeyedPoster); ok {
		return kp.PostKeyed(ctx, it.Message, text, it.ID+".note", again)
	}
	return p.Post(ctx, it.Message, text)
}

// tellFileFailed tells the user of a file item given up, in text, once:
// the chat itself refused the upload, and a post of text may still pass.
func (o *Outbox) tellFileFailed(ctx context.Context, p channels.Poster, it *Item) {
	if it.File == nil || p == nil {
		return
	}
	o.m.FilesSent.WithLabelValues(it.Channel(), metrics.FileFailed).Inc()
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := p.Post(tctx, it.Message, upload.Failed(it.File.Caption, it.File.ID)); err != nil {
		o.log.WarnContext(ctx, "cannot tell the user a file was not sent", "channel", it.Channel(), "item", it.ID, "err", err)
	}
}
