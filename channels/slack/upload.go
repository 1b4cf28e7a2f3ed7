package slack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/retry"
)

// Files out. A file goes into a thread the way Slack takes uploads since
// files.upload was retired, in three steps:
//
//  1. files.getUploadURLExternal (filename, length) gives an upload URL
//     and a file id;
//  2. the bytes are POSTed to that URL, which must be on Slack's file
//     host (files.slack.com, or the host of the configured API URL): an
//     upload URL anywhere else is refused, nothing is sent there;
//  3. files.completeUploadExternal shares the file into the channel
//     (channel_id) and thread (thread_ts), with the caption as its
//     initial_comment.
//
// Only the third step shows anything; a file uploaded but never completed
// stays private to the bot, so the first two are simply repeated on the
// next try. Slack's answer to the third names the file, not the message
// it made, so the id Upload returns is the file's ("F…").
//
// Exactly once across tries and replicas: Slack takes no idempotency key
// and no metadata on a file share, so the file's name carries the mark
// instead. The name given to Slack is the file's own with a tag before
// its extension, the first 12 hex digits of SHA-256 of the delivery key
// ("chart.png" is shared as "chart.3f2a9c01be77.png"; the title people
// see is "chart.png"). A try after one that may have reached Slack reads
// the thread back (conversations.replies, or conversations.history outside
// a thread, as once.go does for posts) for a file of the bot's with that
// name and returns its id instead of sharing a copy. A workspace that
// refuses the look (no history scope) gets the file again.
//
// Uploading needs the bot scope files:write.

var _ channels.Uploader = (*Adapter)(nil)

// Limits of what Adapter uploads. Slack takes files up to 1 GB; Parley
// holds a file in memory while it sends it, and Slack makes previews of
// images only up to a few tens of megabytes, so the limits are lower:
// an image over MaxUploadImage is scaled down by the gateway, any other
// file over MaxUploadFile is refused with a note.
const (
	MaxUploadImage = 20 << 20
	MaxUploadFile  = 100 << 20
)

// uploadTimeout bounds the byte upload to the file host, which may be
// slower than a Web API call.
const uploadTimeout = 2 * time.Minute

// FileLimits implements channels.Uploader. A slash command's answer is
// ephemeral, through its response_url, which takes no file: nothing
// there.
func (a *Adapter) FileLimits(m channels.Message) channels.FileLimits {
	if m.Meta[MetaResponseURL] != "" {
		return channels.FileLimits{}
	}
	return channels.FileLimits{MaxImage: MaxUploadImage, MaxFile: MaxUploadFile}
}

// Upload implements channels.Uploader: one try of the three steps, after
// a look for the file in the thread when again says an earlier try may
// have shared it.
func (a *Adapter) Upload(ctx context.Context, m channels.Message, f channels.File, key string, again bool) (string, error) {
	if lim := a.FileLimits(m); lim.MaxFile == 0 {
		return "", &channels.PostError{Err: errors.New("slack: a slash command's answer cannot carry a file")}
	}
	name := taggedName(f.Name, key)
	if again && key != "" {
		id, err := a.uploaded(ctx, m, name)
		if err != nil || id != "" {
			return id, a.uploadError(ctx, "conversations.replies", err)
		}
	}
	method, id, err := a.upload(ctx, m, f, name)
	return id, a.uploadError(ctx, method, err)
}

// upload makes the three calls and returns the file's id, or the method
// that failed and why.
func (a *Adapter) upload(ctx context.Context, m channels.Message, f channels.File, name string) (method, id string, err error) {
	form := url.Values{"token": {a.cfg.BotToken.Reveal()}, "filename": {name}, "length": {strconv.Itoa(len(f.Data))}}
	var target uploadTarget
	if err := a.postForm(ctx, "files.getUploadURLExternal", form, &target); err != nil {
		return "files.getUploadURLExternal", "", err
	}
	u, err := url.Parse(target.UploadURL)
	if err != nil || target.FileID == "" || !a.fileHostAllowed(u) {
		return "files.getUploadURLExternal", "", errForeignUploadURL
	}
	if err := a.putBytes(ctx, u, f.Data); err != nil {
		return "upload", "", err
	}
	files, _ := json.Marshal([]map[string]string{{"id": target.FileID, "title": f.Name}})
	form = url.Values{"token": {a.cfg.BotToken.Reveal()}, "files": {string(files)}, "channel_id": {m.Chat}}
	if ts := m.Meta[MetaThreadTS]; ts != "" {
		form.Set("thread_ts", ts)
	}
	// The caption is the share's text: mrkdwn, mentions as Parts renders
	// them, and one message long.
	if parts := channels.Split(ToMrkdwn(f.Caption, a.cfg.AllowMentions), MaxMessageBytes); len(parts) > 0 {
		form.Set("initial_comment", parts[0])
	}
	var done completedUpload
	if err := a.postForm(ctx, "files.completeUploadExternal", form, &done); err != nil {
		return "files.completeUploadExternal", "", err
	}
	for _, df := range done.Files {
		if df.ID != "" {
			return "", df.ID, nil
		}
	}
	return "", target.FileID, nil
}

// uploadTarget is files.getUploadURLExternal's answer.
type uploadTarget struct {
	slackapi.SlackResponse
	UploadURL string `json:"upload_url"`
	FileID    string `json:"file_id"`
}

// completedUpload is files.completeUploadExternal's answer.
type completedUpload struct {
	slackapi.SlackResponse
	Files []struct {
		ID string `json:"id"`
	} `json:"files"`
}

// errForeignUploadURL is an upload URL off Slack's file host, or none.
var errForeignUploadURL = errors.New("files.getUploadURLExternal gave no upload URL on Slack's file host: nothing was sent")

// putBytes POSTs data to the upload URL u, following no redirect: the
// file host answers 200, and a redirect could lead anywhere. The errors
// are slack-go's, as postForm's, so that classify reads them alike; the
// URL, which grants the upload, is left out of them.
func (a *Adapter) putBytes(ctx context.Context, u *url.URL, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, uploadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(data))
	if err != nil {
		return errForeignUploadURL
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	client := *a.opts.HTTPClient
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err
		}
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
	switch {
	case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "":
		after, _ := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
		return &slackapi.RateLimitedError{RetryAfter: time.Duration(after) * time.Second}
	case resp.StatusCode != http.StatusOK:
		return slackapi.StatusCodeError{Code: resp.StatusCode, Status: resp.Status}
	}
	return nil
}

// uploadError is a failed Upload as a *channels.PostError, counted and
// classified like a post's failure; nil for nil.
func (a *Adapter) uploadError(ctx context.Context, method string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errForeignUploadURL):
		a.m.ChannelAPIErrors.WithLabelValues(Name, "foreign_upload_url").Inc()
		return &channels.PostError{Err: retry.Mark(retry.ClientError, fmt.Errorf("slack: %w", err))}
	case ctx.Err() != nil:
		return fmt.Errorf("slack: %s: %w", method, err)
	}
	f := a.failed(err)
	return &channels.PostError{Retry: f.retry, After: f.retryAfter, Err: retry.Mark(f.reason, fmt.Errorf("slack: %s: %w", method, err))}
}

// taggedName is the name a file is uploaded under: its own, with the tag
// of key before its extension (no tag without a key).
func taggedName(name, key string) string {
	if key == "" {
		return name
	}
	sum := sha256.Sum256([]byte(key))
	ext := path.Ext(name)
	return strings.TrimSuffix(name, ext) + "." + hex.EncodeToString(sum[:6]) + ext
}

// sharedAnswer is what Parley reads of a thread read back for a file.
type sharedAnswer struct {
	slackapi.SlackResponse
	Messages []struct {
		User  string `json:"user"`
		Files []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"files"`
	} `json:"messages"`
	ResponseMetadata struct {
		NextCursor string `json:"next_cursor"`
	} `json:"response_metadata"`
}

// uploaded looks in m's thread (or, outside a thread, its channel) for a
// file of the bot's named name, shared in the last lookupWindow, and
// returns its id ("" when there is none). A look refused for good (a
// missing history scope) is logged and finds nothing, so the file is
// sent; one that may pass is an error, since sending could make a copy.
func (a *Adapter) uploaded(ctx context.Context, m channels.Message, name string) (string, error) {
	method := "conversations.history"
	form := url.Values{"token": {a.cfg.BotToken.Reveal()}, "channel": {m.Chat}, "limit": {strconv.Itoa(lookupLimit)},
		"oldest": {strconv.FormatInt(a.opts.Now().Add(-lookupWindow).Unix(), 10) + ".000000"}, "inclusive": {"true"}}
	if thread := m.Meta[MetaThreadTS]; thread != "" {
		method = "conversations.replies"
		form.Set("ts", thread)
	}
	bot := a.BotUserID()
	for range lookupPages {
		var ans sharedAnswer
		if err := a.postForm(ctx, method, form, &ans); err != nil {
			if classify(err).retry || ctx.Err() != nil {
				return "", fmt.Errorf("look for an earlier try: %w", err)
			}
			a.countAPIError(err)
			a.log.Warn("cannot look for an earlier try of a file in its thread; sending it, which may make a copy", "err", err)
			return "", nil
		}
		for _, msg := range ans.Messages {
			if bot != "" && msg.User != "" && msg.User != bot {
				continue
			}
			for _, f := range msg.Files {
				if f.Name == name && f.ID != "" {
					return f.ID, nil
				}
			}
		}
		if ans.ResponseMetadata.NextCursor == "" {
			break
		}
		form.Set("cursor", ans.ResponseMetadata.NextCursor)
	}
	return "", nil
}
