package feishu

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"

	"github.com/parleyhq/parley/channels"
)

// Files out. A file goes into the conversation in two steps: the bytes
// are uploaded (an image to im/v1/images with image_type=message, any
// other file to im/v1/files with its file_type and file_name), which
// shows nothing and gives a key; then a message naming the key is sent
// where Post sends (a reply to the user's message, in its thread when the
// conversation is one; in a direct chat, to the chat).
//
// An image with a caption is one post message, the image and the caption
// below it, so that they stay together; an image without one is an image
// message. A file is a file message, its caption a text message right
// after it in the same thread (a post cannot carry a file).
//
// Exactly once: each message carries a uuid made from the delivery key
// (and which message of the file it is), and Feishu makes at most one
// message of a uuid within an hour, answering a repeat with the message
// it made. So every try is the same message, whatever an earlier try did:
// an upload repeated leaves only an unused key, and again needs no look.

var _ channels.Uploader = (*Adapter)(nil)

// Upload limits of the Open API: 10 MiB an image, 30 MiB a file.
const (
	MaxUploadImage = 10 << 20
	MaxUploadFile  = 30 << 20
)

// uploadImageTypes are the image types im/v1/images takes; another image
// (an SVG) is sent as a file.
var uploadImageTypes = map[string]bool{
	"image/jpeg": true, "image/png": true, "image/webp": true, "image/gif": true,
	"image/tiff": true, "image/bmp": true, "image/x-icon": true, "image/vnd.microsoft.icon": true,
}

// FileLimits implements channels.Uploader: Feishu's own limits, in every
// chat.
func (a *Adapter) FileLimits(channels.Message) channels.FileLimits {
	return channels.FileLimits{MaxImage: MaxUploadImage, MaxFile: MaxUploadFile}
}

// Upload implements channels.Uploader: one try at uploading f and sending
// the message(s) naming it into m's conversation; again is not needed
// (the uuids make every try the same messages). It returns the id of the
// image or file message.
func (a *Adapter) Upload(ctx context.Context, m channels.Message, f channels.File, key string, _ bool) (string, error) {
	msgType, content, err := a.uploadContent(ctx, f)
	if err != nil {
		return "", uploadError(ctx, err)
	}
	once := a.calls.Once() // the outbox tries again
	id, err := a.postWith(ctx, once, m, msgType, content, uploadUUID(m, key, "file"))
	if err != nil {
		return "", uploadError(ctx, err)
	}
	if strings.TrimSpace(f.Caption) != "" && msgType == "file" {
		text, _ := json.Marshal(map[string]string{"text": f.Caption})
		if _, err := a.postWith(ctx, once, m, "text", string(text), uploadUUID(m, key, "caption")); err != nil {
			return "", uploadError(ctx, err)
		}
	}
	return id, nil
}

// uploadContent uploads f and returns the message that shows it.
func (a *Adapter) uploadContent(ctx context.Context, f channels.File) (msgType, content string, err error) {
	if !uploadImageTypes[f.Type] {
		body := larkcore.NewFormdata().AddField("file_type", fileType(f.Type, f.Name)).AddField("file_name", f.Name).
			AddFile("file", bytes.NewReader(f.Data))
		var out struct {
			Data struct {
				FileKey string `json:"file_key"`
			} `json:"data"`
		}
		if err := a.callWith(ctx, a.calls.Once(), "file_upload", http.MethodPost, "/open-apis/im/v1/files", nil, nil, body, &out); err != nil {
			return "", "", err
		}
		if !isResourceKey(out.Data.FileKey) {
			return "", "", missingField("file_upload", "file_key")
		}
		b, _ := json.Marshal(map[string]string{"file_key": out.Data.FileKey})
		return "file", string(b), nil
	}
	body := larkcore.NewFormdata().AddField("image_type", "message").AddFile("image", bytes.NewReader(f.Data))
	var out struct {
		Data struct {
			ImageKey string `json:"image_key"`
		} `json:"data"`
	}
	if err := a.callWith(ctx, a.calls.Once(), "image_upload", http.MethodPost, "/open-apis/im/v1/images", nil, nil, body, &out); err != nil {
		return "", "", err
	}
	if !isResourceKey(out.Data.ImageKey) {
		return "", "", missingField("image_upload", "image_key")
	}
	if strings.TrimSpace(f.Caption) == "" {
		b, _ := json.Marshal(map[string]string{"image_key": out.Data.ImageKey})
		return "image", string(b), nil
	}
	b, _ := json.Marshal(map[string]any{"zh_cn": map[string]any{"content": [][]map[string]string{
		{{"tag": "img", "image_key": out.Data.ImageKey}},
		{{"tag": "text", "text": f.Caption}},
	}}})
	return "post", string(b), nil
}

// fileType is the file_type im/v1/files wants for a file of MIME type
// typ named name: Feishu previews these kinds; anything else is a
// "stream", a plain download.
func fileType(typ, name string) string {
	ext := strings.ToLower(name[strings.LastIndexByte(name, '.')+1:])
	switch {
	case typ == "application/pdf":
		return "pdf"
	case typ == "video/mp4":
		return "mp4"
	case typ == "audio/opus" || typ == "audio/ogg" && ext == "opus":
		return "opus"
	case typ == "application/msword" || strings.Contains(typ, "wordprocessingml"):
		return "doc"
	case typ == "application/vnd.ms-excel" || strings.Contains(typ, "spreadsheetml"):
		return "xls"
	case typ == "application/vnd.ms-powerpoint" || strings.Contains(typ, "presentationml"):
		return "ppt"
	}
	return "stream"
}

// uploadUUID is the uuid of one message of the file key sent into m's
// chat: the same on every try, within Feishu's 50 characters.
func uploadUUID(m channels.Message, key, part string) string {
	h := sha256.New()
	fmt.Fprintf(h, "upload\x00%s\x00%s\x00%s\x00%s", m.Chat, m.Meta[MetaMessageID], key, part)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// uploadError classifies a failed Upload for the outbox like a post's,
// with the wait a rate limit asked for.
func uploadError(ctx context.Context, err error) error {
	perr := postError(ctx, err)
	var pe *channels.PostError
	var apiErr *APIError
	if errors.As(perr, &pe) && errors.As(err, &apiErr) {
		pe.After = apiErr.Reset
	}
	return perr
}

// rateLimitReset is the wait a rate-limited answer asks for, from its
// x-ogw-ratelimit-reset header (seconds), or 0.
func rateLimitReset(h http.Header) time.Duration {
	n, err := strconv.Atoi(h.Get("x-ogw-ratelimit-reset"))
	if err != nil || n <= 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, time.Hour)
}
