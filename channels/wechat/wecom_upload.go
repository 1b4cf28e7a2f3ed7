package wechat

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wxapi"
	"github.com/parleyhq/parley/retry"
)

// Files out over a WeCom AI bot: over the long connection, so only on the
// replica that holds it. The bytes go up as temporary media in chunks
// (aibot_upload_media_init, _chunk × n, _finish: a media_id good for
// three days), then aibot_send_msg sends an image or file message naming
// it into the chat, the caption as a markdown message after it. The
// steps are kept in Redis as for iLink; an upload is repeated after a
// lost answer, a message is not.

// WeCom's temporary media limits, as 10⁶ bytes a MB, and its chunks.
const (
	MaxWeComImage   = 10_000_000
	MaxWeComFile    = 20_000_000
	wecomChunkBytes = 512 << 10
	wecomMaxChunks  = 100
)

// WebSocket commands of media.
const (
	cmdUploadInit   = "aibot_upload_media_init"
	cmdUploadChunk  = "aibot_upload_media_chunk"
	cmdUploadFinish = "aibot_upload_media_finish"
)

// errNotHolder is an upload on a replica without the bot's connection.
var errNotHolder = errors.New("wechat: this replica does not hold the WeCom AI bot's connection; another try may land on the one that does")

// upload sends f into m's chat over the connection this replica holds.
func (s *wecomSide) upload(ctx context.Context, m channels.Message, f channels.File, key string) (string, error) {
	c := s.current()
	if c == nil {
		return "", &channels.PostError{Retry: true, Err: errNotHolder}
	}
	chat := jobFor(m, "", "").ChatID
	kind := "file"
	if f.Type == "image/png" || f.Type == "image/jpeg" {
		kind = "image"
	}
	a := s.adapter
	steps := wxapi.NewSteps(a.opts.Client, a.opts.Prefix+"wechat:upload:{wecom:"+a.cfg.WeComBotID+"}:", key, uploadStepsTTL)
	mediaID, err := steps.Do(ctx, "media", func() (string, error) { return s.uploadMedia(ctx, c, kind, f) })
	if err != nil {
		return "", s.mediaError(ctx, err, true)
	}
	body := map[string]any{"chatid": chat, "msgtype": kind, kind: map[string]string{"media_id": mediaID}}
	if _, err := steps.Do(ctx, "message", func() (string, error) { return "sent", s.sendFrame(ctx, c, body) }); err != nil {
		return "", s.mediaError(ctx, err, false)
	}
	if parts := channels.Split(f.Caption, pushLimit); len(parts) > 0 {
		caption := map[string]any{"chatid": chat, "msgtype": "markdown", "markdown": map[string]string{"content": parts[0]}}
		if _, err := steps.Do(ctx, "caption", func() (string, error) { return "sent", s.sendFrame(ctx, c, caption) }); err != nil {
			return "", s.mediaError(ctx, err, false)
		}
	}
	return "", nil
}

// uploadMedia uploads f in chunks and returns its media_id.
func (s *wecomSide) uploadMedia(ctx context.Context, c *wecomConn, kind string, f channels.File) (string, error) {
	chunks := (len(f.Data) + wecomChunkBytes - 1) / wecomChunkBytes
	if chunks > wecomMaxChunks || len(f.Data) < 5 {
		return "", &channels.PostError{Err: fmt.Errorf("wechat: a file of %d bytes cannot be uploaded to WeCom", len(f.Data))}
	}
	sum := md5.Sum(f.Data)
	var init struct {
		UploadID string `json:"upload_id"`
	}
	if err := s.mediaCall(ctx, c, cmdUploadInit, map[string]any{"type": kind, "filename": f.Name, "total_size": len(f.Data),
		"total_chunks": chunks, "md5": hex.EncodeToString(sum[:])}, &init); err != nil {
		return "", err
	}
	if init.UploadID == "" {
		return "", &wecomAckError{cmd: cmdUploadInit, msg: "no upload_id"}
	}
	for i := range chunks {
		part := f.Data[i*wecomChunkBytes : min((i+1)*wecomChunkBytes, len(f.Data))]
		if err := s.mediaCall(ctx, c, cmdUploadChunk, map[string]any{"upload_id": init.UploadID, "chunk_index": i,
			"base64_data": base64.StdEncoding.EncodeToString(part)}, nil); err != nil {
			return "", err
		}
	}
	var done struct {
		MediaID string `json:"media_id"`
	}
	if err := s.mediaCall(ctx, c, cmdUploadFinish, map[string]any{"upload_id": init.UploadID}, &done); err != nil {
		return "", err
	}
	if done.MediaID == "" {
		return "", &wecomAckError{cmd: cmdUploadFinish, msg: "no media_id"}
	}
	return done.MediaID, nil
}

// sendFrame is one aibot_send_msg.
func (s *wecomSide) sendFrame(ctx context.Context, c *wecomConn, body map[string]any) error {
	return s.mediaCall(ctx, c, cmdSend, body, nil)
}

// mediaCall sends one frame and reads its answer's body into out.
func (s *wecomSide) mediaCall(ctx context.Context, c *wecomConn, cmd string, body, out any) error {
	ack, err := c.request(ctx, cmd, body)
	if err != nil {
		return err
	}
	if ack.ErrCode != 0 {
		s.adapter.apiError(wecomCode(ack.ErrCode))
		return &wecomAckError{cmd: cmd, code: ack.ErrCode, msg: ack.ErrMsg}
	}
	if out != nil && len(ack.Body) > 0 {
		if err := json.Unmarshal(ack.Body, out); err != nil {
			return &wecomAckError{cmd: cmd, msg: "unreadable answer"}
		}
	}
	return nil
}

// wecomAckError is a media frame WeCom answered with an errcode (or
// without what it should carry).
type wecomAckError struct {
	cmd  string
	code int
	msg  string
}

func (e *wecomAckError) Error() string {
	return fmt.Sprintf("wechat: %s: errcode %d %s", e.cmd, e.code, e.msg)
}

// mediaError classifies a failed step for the outbox: WeCom busy or
// rate-limited, a connection that closed before the frame went, or (for
// an upload, which shows nothing) any unanswered frame, may pass; another
// errcode, or a message whose answer did not come, does not.
func (s *wecomSide) mediaError(ctx context.Context, err error, repeatable bool) error {
	var pe *channels.PostError
	var ae *wecomAckError
	switch {
	case errors.As(err, &pe):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("wechat: WeCom file: %w", err)
	case errors.As(err, &ae) && (ae.code == wxapi.CodeBusy || ae.code == wxapi.CodeFrequencyLimit):
		return &channels.PostError{Retry: true, Err: retry.Mark(retry.ServerError, err)}
	case ae != nil:
		return &channels.PostError{Err: retry.Mark(retry.ClientError, err)}
	case errors.Is(err, errConnClosed) || repeatable:
		return &channels.PostError{Retry: true, Err: retry.Mark(retry.Network, fmt.Errorf("wechat: WeCom file: %w", err))}
	}
	return &channels.PostError{Err: fmt.Errorf("wechat: WeCom file: the message may have been sent, its answer did not come; not sending it again: %w", err)}
}
