package wecomapp

import (
	"context"
	"fmt"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wxapi"
)

// Files out. A file goes where Send puts the model's answers (the member
// who asked, or the app's appchat) in two steps: the bytes are uploaded
// as temporary media (media/upload, type image for a JPG or PNG, file for
// anything else), which shows nothing and gives a media_id good for three
// days; then an image or file message names it. A caption follows as a
// text message: WeCom's image and file messages carry no text.
//
// Exactly once across tries and replicas: the media_id of a delivery key
// is kept in Redis (the first replica to upload wins; another's upload is
// left unused), so every try sends the same message body, and message/send
// is called with enable_duplicate_check, which drops a body WeCom
// delivered within duplicate_check_interval. The caption is sent the same
// way; the one cost is that a caption the very same as one sent to that
// member in the last half hour is dropped too. appchat/send has no
// duplicate check: a try there whose answer was lost may show the file
// twice. Once a step's answer came, Redis remembers it, and a later try
// of the same key does not repeat it.

var _ channels.Uploader = (*Adapter)(nil)

// Upload limits of temporary media: an image (JPG or PNG) up to 10 MB,
// any other file up to 20 MB. WeCom's "MB" is taken as 10⁶ bytes, the
// smaller reading.
const (
	MaxUploadImage = 10_000_000
	MaxUploadFile  = 20_000_000
)

// duplicateInterval is the duplicate_check_interval of a file's messages,
// in seconds: longer than any retry of the outbox.
const duplicateInterval = 1800

// uploadTTL is how long the steps of a delivery key are remembered: past
// the duplicate check's interval, within the media's three days.
const uploadTTL = 24 * time.Hour

// FileLimits implements channels.Uploader: WeCom's limits, for every
// conversation of a configured app.
func (a *Adapter) FileLimits(m channels.Message) channels.FileLimits {
	if _, ok := a.apps[m.Workspace]; !ok {
		return channels.FileLimits{}
	}
	return channels.FileLimits{MaxImage: MaxUploadImage, MaxFile: MaxUploadFile}
}

// Upload implements channels.Uploader: one try at the upload, the message
// and the caption, each skipped when an earlier try of key did it. It
// returns the msgid of the image or file message.
func (a *Adapter) Upload(ctx context.Context, m channels.Message, f channels.File, key string, _ bool) (string, error) {
	ap, ok := a.apps[m.Workspace]
	if !ok {
		return "", &channels.PostError{Err: fmt.Errorf("wecom_app: no app %q is configured", m.Workspace)}
	}
	steps := wxapi.NewSteps(a.opts.Redis, a.opts.Prefix+Name+":{"+ap.cfg.Name+"}:upload:", key, uploadTTL)
	kind := "file"
	if f.Type == "image/png" || f.Type == "image/jpeg" {
		kind = "image"
	}
	mediaID, err := steps.Do(ctx, "media", func() (string, error) {
		return ap.api.UploadMedia(ctx, kind, f.Name, f.Type, f.Data)
	})
	if err != nil {
		return "", wxapi.SendError(ctx, fmt.Errorf("wecom_app: %w", err))
	}
	msgID, err := steps.Do(ctx, "message", func() (string, error) {
		return a.sendMessage(ctx, ap, m, kind, map[string]string{"media_id": mediaID})
	})
	if err != nil {
		return "", wxapi.SendError(ctx, fmt.Errorf("wecom_app: %w", err))
	}
	text := f.Caption
	if ap.cfg.Format == FormatText {
		text = channels.PlainText(text)
	}
	if parts := channels.Split(text, MessageLimit); len(parts) > 0 {
		_, err := steps.Do(ctx, "caption", func() (string, error) {
			_, err := a.sendMessage(ctx, ap, m, ap.cfg.Format, map[string]string{"content": parts[0]})
			return "sent", err
		})
		if err != nil {
			return "", wxapi.SendError(ctx, fmt.Errorf("wecom_app: caption: %w", err))
		}
	}
	return msgID, nil
}

// sendMessage sends one message of msgType with content where Send sends
// the model's answers, with the duplicate check, and returns its msgid.
// The body is a struct so that its JSON is the same on every try: the
// duplicate check compares bodies.
func (a *Adapter) sendMessage(ctx context.Context, ap *app, m channels.Message, msgType string, content map[string]string) (string, error) {
	body := mediaMessage{MsgType: msgType}
	switch msgType {
	case "image":
		body.Image = content
	case "file":
		body.File = content
	case FormatText:
		body.Text = content
	default:
		body.Markdown = content
	}
	path, op := sendPath, "message/send"
	if ap.cfg.AppChat != "" {
		body.ChatID, path, op = ap.cfg.AppChat, appChatPath, "appchat/send"
	} else {
		body.ToUser, body.AgentID = m.Chat, ap.cfg.AgentID
		body.DuplicateCheck, body.DuplicateInterval = 1, duplicateInterval
	}
	var out struct {
		MsgID string `json:"msgid"`
	}
	err := ap.api.CallWith(ctx, ap.api.Retrier.Once(), op, path, body, &out)
	return out.MsgID, err
}

// mediaMessage is the body of message/send and appchat/send.
type mediaMessage struct {
	ToUser            string            `json:"touser,omitempty"`
	ChatID            string            `json:"chatid,omitempty"`
	AgentID           int64             `json:"agentid,omitempty"`
	MsgType           string            `json:"msgtype"`
	Image             map[string]string `json:"image,omitempty"`
	File              map[string]string `json:"file,omitempty"`
	Text              map[string]string `json:"text,omitempty"`
	Markdown          map[string]string `json:"markdown,omitempty"`
	DuplicateCheck    int               `json:"enable_duplicate_check,omitempty"`
	DuplicateInterval int               `json:"duplicate_check_interval,omitempty"`
}
