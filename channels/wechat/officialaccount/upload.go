package officialaccount

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wxapi"
)

// Files out. An Official Account can send a user an image, and no other
// file: the image is uploaded as temporary media (media/upload,
// type=image), then sent as a customer-service image message, its caption
// as a text message after it. A passive reply could carry one image, but
// the callback's passive reply is the answer's text, and it is gone by the
// time a file is sent: files always go as customer-service messages, so
// they need what a long answer needs (the account's customer-service
// permission, and the user's 48-hour window open).
//
// Exactly once as far as WeChat lets a sender know: customer-service
// messages carry no key and cannot be read back. The steps a try did are
// kept in Redis (wxapi.Steps), so no replica repeats an upload or a
// message whose answer came; a message whose answer was lost (a timeout)
// is not sent again but fails for good, and the gateway tells the user in
// text: a missing image is better than two.

var _ channels.Uploader = (*Adapter)(nil)

// MaxUploadImage is the size of a temporary image (10 MB, taken as 10⁶
// bytes a MB).
const MaxUploadImage = 10_000_000

// uploadImageTypes are the image types temporary media takes.
var uploadImageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/bmp": true}

// uploadTTL is how long the steps of a file are remembered.
const uploadTTL = 24 * time.Hour

// errNotImage refuses a file an Official Account cannot send.
var errNotImage = errors.New("wechat_oa: an Official Account can send images (PNG, JPEG, GIF, BMP) only")

// FileLimits implements channels.Uploader: images only.
func (a *Adapter) FileLimits(channels.Message) channels.FileLimits {
	return channels.FileLimits{MaxImage: MaxUploadImage}
}

// Upload implements channels.Uploader: one try at the upload, the image
// message and the caption, each skipped when an earlier try of key did
// it. Customer-service messages have no id: it returns "".
func (a *Adapter) Upload(ctx context.Context, m channels.Message, f channels.File, key string, _ bool) (string, error) {
	if !uploadImageTypes[f.Type] {
		return "", &channels.PostError{Err: errNotImage}
	}
	steps := wxapi.NewSteps(a.opts.Redis, a.opts.Prefix+Name+":upload:{"+a.cfg.AppID+"}:", key, uploadTTL)
	mediaID, err := steps.Do(ctx, "media", func() (string, error) {
		return a.api.UploadMedia(ctx, "image", f.Name, f.Type, f.Data)
	})
	if err != nil {
		return "", wxapi.SendError(ctx, fmt.Errorf("wechat_oa: %w", err))
	}
	image := map[string]any{"touser": m.Chat, "msgtype": "image", "image": map[string]string{"media_id": mediaID}}
	if _, err := steps.Do(ctx, "message", func() (string, error) { return "sent", a.sendOnce(ctx, image) }); err != nil {
		return "", a.customError(ctx, err)
	}
	if parts := channels.Split(channels.PlainText(f.Caption), MessageLimit); len(parts) > 0 {
		caption := map[string]any{"touser": m.Chat, "msgtype": "text", "text": map[string]string{"content": parts[0]}}
		if _, err := steps.Do(ctx, "caption", func() (string, error) { return "sent", a.sendOnce(ctx, caption) }); err != nil {
			return "", a.customError(ctx, err)
		}
	}
	return "", nil
}

// sendOnce is one try of a customer-service message.
func (a *Adapter) sendOnce(ctx context.Context, body map[string]any) error {
	return a.api.CallWith(ctx, a.api.Retrier.Once(), "message/custom/send", customPath, body, nil)
}

// customError classifies a failed customer-service message of a file: a
// closed window and a message that may have reached WeChat are final.
func (a *Adapter) customError(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("wechat_oa: %w", err)
	case windowClosed(err):
		return &channels.PostError{Err: fmt.Errorf("wechat_oa: the user's 48-hour window is closed; the image is not sent: %w", err)}
	case wxapi.MayHaveLanded(err):
		return &channels.PostError{Err: fmt.Errorf("wechat_oa: the image may have been sent, its answer was lost; not sending it again: %w", err)}
	}
	return wxapi.SendError(ctx, fmt.Errorf("wechat_oa: %w", err))
}
