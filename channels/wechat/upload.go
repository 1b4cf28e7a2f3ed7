package wechat

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wxapi"
	"github.com/parleyhq/parley/retry"
)

// Files out.
//
// iLink (personal WeChat) sends an image the way its clients do: the
// bytes are encrypted with a fresh AES-128 key (ECB, PKCS#7, the scheme of
// the media it delivers), getuploadurl is told their sizes, MD5 and key
// and answers an upload_param, the ciphertext is POSTed to the CDN
// (ILinkCDNURL/upload, or an upload_full_url, which must be on the CDN's
// host: one anywhere else is refused and nothing is sent there), whose
// answer names the download in x-encrypted-param, and sendmessage sends an
// image item naming it, the caption as a text message after it. Other
// files are not sent (FileLimits.MaxFile is 0): the gateway says so in
// text.
//
// Exactly once as far as iLink lets a sender know: the steps a try did
// (the upload, the message, the caption) are kept in Redis, so no replica
// repeats one whose answer came; a message whose answer was lost is not
// sent again but fails for good, as iLink answers are posted (ilink_send.go):
// a missing image rather than two. Each message's client_id is made from
// the delivery key.
//
// A WeCom AI bot sends images and files over its long connection
// (wecom_upload.go).

var _ channels.Uploader = (*Adapter)(nil)

// MaxILinkImage is the largest image sent over iLink. iLink publishes no
// limit; this is WeChat's usual 10 MB for images, as 10⁶ bytes a MB.
const MaxILinkImage = 10_000_000

// Bounds of a file's sending.
const (
	uploadStepsTTL   = 24 * time.Hour
	cdnUploadTimeout = 2 * time.Minute
	ilinkMediaImage  = 1 // getuploadurl's media_type of an image
)

// FileLimits implements channels.Uploader: images over iLink; images and
// files over a WeCom AI bot, WeCom's temporary media limits.
func (a *Adapter) FileLimits(m channels.Message) channels.FileLimits {
	switch {
	case m.Meta["via"] == ViaILink:
		return channels.FileLimits{MaxImage: MaxILinkImage}
	case m.Meta["via"] == ViaWeCom && a.wecom != nil:
		return channels.FileLimits{MaxImage: MaxWeComImage, MaxFile: MaxWeComFile}
	}
	return channels.FileLimits{}
}

// Upload implements channels.Uploader: one try at the steps not yet done
// for key, by the transport m came by. Over iLink it returns the
// client_id of the image message; a WeCom message has no id.
func (a *Adapter) Upload(ctx context.Context, m channels.Message, f channels.File, key string, _ bool) (string, error) {
	switch {
	case m.Meta["via"] == ViaWeCom && a.wecom != nil:
		return a.wecom.upload(ctx, m, f, key)
	case m.Meta["via"] != ViaILink:
		return "", &channels.PostError{Err: fmt.Errorf("wechat: no transport here sends files of a message via %q", m.Meta["via"])}
	case !f.Image():
		return "", &channels.PostError{Err: errors.New("wechat: iLink sends images only")}
	case a.ilink == nil:
		return "", &channels.PostError{Retry: true, Err: errors.New("wechat: iLink is not configured on this replica")}
	}
	return a.ilink.upload(ctx, m, f, key)
}

// upload sends f over iLink, step by step.
func (s *ilinkSide) upload(ctx context.Context, m channels.Message, f channels.File, key string) (string, error) {
	acct, ok, err := s.adapter.opts.State.Account(ctx, m.Workspace)
	if err != nil {
		return "", &channels.PostError{Retry: true, Err: err}
	}
	if !ok {
		return "", &channels.PostError{Err: fmt.Errorf("wechat: iLink bot %s is not logged in", m.Workspace)}
	}
	cl := s.client(acct)
	steps := wxapi.NewSteps(s.adapter.opts.Client, s.adapter.opts.Prefix+"wechat:upload:{"+acct.BotID+"}:", key, uploadStepsTTL)
	media, err := steps.Do(ctx, "media", func() (string, error) { return s.uploadImage(ctx, cl, m.Chat, f.Data) })
	if err != nil {
		return "", s.uploadError(ctx, acct, err)
	}
	item, err := imageItem(media)
	if err != nil {
		return "", &channels.PostError{Err: err}
	}
	clientID := fileClientID(key, "image")
	if _, err := steps.Do(ctx, "message", func() (string, error) {
		return clientID, s.sendItem(ctx, cl, acct, m, clientID, item)
	}); err != nil {
		return "", s.uploadError(ctx, acct, err)
	}
	if caption := strings.TrimSpace(channels.PlainText(f.Caption)); caption != "" {
		text := map[string]any{"type": ilinkItemText, "text_item": map[string]string{"text": caption}}
		captionID := fileClientID(key, "caption")
		if _, err := steps.Do(ctx, "caption", func() (string, error) {
			return captionID, s.sendItem(ctx, cl, acct, m, captionID, text)
		}); err != nil {
			return "", s.uploadError(ctx, acct, err)
		}
	}
	return clientID, nil
}

// uploadImage encrypts data, uploads it to the CDN for user, and returns
// what the image item needs: the download param, the key (hex) and the
// ciphertext's size, as "param|key|size".
func (s *ilinkSide) uploadImage(ctx context.Context, cl *ilinkClient, user string, data []byte) (string, error) {
	key, fileKey := make([]byte, 16), make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	if _, err := rand.Read(fileKey); err != nil {
		return "", err
	}
	cipherText, err := encryptECB(data, key)
	if err != nil {
		return "", err
	}
	sum := md5.Sum(data)
	req := map[string]any{
		"filekey": hex.EncodeToString(fileKey), "media_type": ilinkMediaImage, "to_user_id": user,
		"rawsize": len(data), "rawfilemd5": hex.EncodeToString(sum[:]), "filesize": len(cipherText),
		"no_need_thumb": true, "aeskey": hex.EncodeToString(key), "base_info": defaultBaseInfo,
	}
	var out struct {
		UploadParam   string `json:"upload_param"`
		UploadFullURL string `json:"upload_full_url"`
	}
	if err := cl.do(ctx, http.MethodPost, "/ilink/bot/getuploadurl", req, &out); err != nil {
		return "", err
	}
	target, err := s.cdnUploadURL(out.UploadFullURL, out.UploadParam, hex.EncodeToString(fileKey))
	if err != nil {
		return "", err
	}
	param, err := s.putCDN(ctx, target, cipherText)
	if err != nil {
		return "", err
	}
	return param + "|" + hex.EncodeToString(key) + "|" + strconv.Itoa(len(cipherText)), nil
}

// errForeignUpload is an upload URL off iLink's CDN, or none.
var errForeignUpload = errors.New("wechat: getuploadurl gave no upload URL on iLink's CDN: nothing was sent")

// cdnUploadURL is where the ciphertext goes: the upload_full_url iLink
// gave, if it is on the configured CDN's scheme and host, else the CDN's
// upload route with upload_param.
func (s *ilinkSide) cdnUploadURL(full, param, fileKey string) (*url.URL, error) {
	cdn, err := url.Parse(strings.TrimRight(s.adapter.cfg.ILinkCDNURL, "/"))
	if err != nil {
		return nil, errForeignUpload
	}
	if full != "" {
		u, err := url.Parse(full)
		if err != nil || u.User != nil || u.Scheme != cdn.Scheme || !strings.EqualFold(u.Host, cdn.Host) {
			return nil, errForeignUpload
		}
		return u, nil
	}
	if param == "" {
		return nil, errForeignUpload
	}
	u := *cdn
	u.Path += "/upload"
	u.RawQuery = url.Values{"encrypted_query_param": {param}, "filekey": {fileKey}}.Encode()
	return &u, nil
}

// putCDN POSTs the ciphertext, following no redirect, and returns the
// download param the CDN answers with. The URL (which grants the upload)
// is left out of its errors.
func (s *ilinkSide) putCDN(ctx context.Context, u *url.URL, cipherText []byte) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, cdnUploadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(cipherText))
	if err != nil {
		return "", errForeignUpload
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	client := *s.adapter.opts.MediaHTTP
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	s.adapter.m.PlatformCalls.WithLabelValues(Name, "cdn_upload").Inc()
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", &httpError{Op: "cdn upload", Err: err}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxILinkBody))
	if resp.StatusCode/100 != 2 {
		return "", &httpError{Op: "cdn upload", Status: resp.StatusCode}
	}
	param := resp.Header.Get("x-encrypted-param")
	if param == "" {
		return "", &httpError{Op: "cdn upload", Err: fmt.Errorf("%w: no x-encrypted-param", errBadBody)}
	}
	return param, nil
}

// imageItem is the item_list entry of an uploaded image.
func imageItem(media string) (map[string]any, error) {
	parts := strings.Split(media, "|")
	if len(parts) != 3 {
		return nil, errors.New("wechat: a recorded upload that is not one")
	}
	size, _ := strconv.Atoi(parts[2])
	return map[string]any{"type": ilinkItemImage, "image_item": map[string]any{
		"media":    map[string]any{"encrypt_query_param": parts[0], "aes_key": base64.StdEncoding.EncodeToString([]byte(parts[1])), "encrypt_type": 1},
		"mid_size": size,
	}}, nil
}

// sendItem sends one message of item to m's user with the newest context
// token.
func (s *ilinkSide) sendItem(ctx context.Context, cl *ilinkClient, acct Account, m channels.Message, clientID string, item map[string]any) error {
	token, _, err := s.tokens.latest(ctx, acct.BotID, m.Chat)
	if err != nil {
		return &channels.PostError{Retry: true, Err: err}
	}
	if token == "" {
		token = m.Meta["context_token"]
	}
	msg := map[string]any{"from_user_id": "", "to_user_id": m.Chat, "client_id": clientID, "message_type": ilinkMsgBot,
		"message_state": ilinkStateFinish, "item_list": []any{item}, "context_token": token}
	if err := cl.do(ctx, http.MethodPost, "/ilink/bot/sendmessage", map[string]any{"msg": msg, "base_info": defaultBaseInfo}, nil); err != nil {
		return err
	}
	if n, err := s.tokens.countSend(ctx, acct.BotID, m.Chat); err == nil {
		s.adapter.m.WeChatSendsSince.WithLabelValues(acct.BotID).Observe(float64(n))
	}
	return nil
}

// uploadError classifies a failed step for the outbox, as post does: a
// 429, a 5xx or a connection never opened may pass; a refusal, an expired
// session, an upload URL off the CDN, or a message that may have reached
// iLink does not. A step that shows nothing (the upload) may be repeated
// after a lost answer.
func (s *ilinkSide) uploadError(ctx context.Context, acct Account, err error) error {
	var pe *channels.PostError
	var ae *apiError
	var he *httpError
	switch {
	case errors.As(err, &pe):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("wechat: iLink file: %w", err)
	case errors.Is(err, errForeignUpload):
		s.adapter.apiError("foreign_upload_url")
		return &channels.PostError{Err: retry.Mark(retry.ClientError, err)}
	}
	s.adapter.apiError(errorCode(err))
	wrapped := fmt.Errorf("wechat: iLink file: %w", err)
	switch {
	case errors.As(err, &ae) && (ae.Ret == ilinkErrExpired || ae.ErrCode == ilinkErrExpired):
		s.expire(ctx, acct)
		return &channels.PostError{Err: retry.Mark(retry.ClientError, wrapped)}
	case ae != nil:
		return &channels.PostError{Err: retry.Mark(retry.ClientError, wrapped)}
	case errors.As(err, &he) && he.Status != 0:
		return &channels.PostError{Retry: retry.RetryableStatus(he.Status), Err: retry.Mark(retry.StatusReason(he.Status), wrapped)}
	case he != nil && (isDialError(he.Err) || he.Op == "cdn upload" || he.Op == "getuploadurl"):
		// Nothing shown yet: the upload may be made again.
		return &channels.PostError{Retry: !errors.Is(he.Err, errBadBody), Err: retry.Mark(retry.Network, wrapped)}
	}
	return &channels.PostError{Err: wrapped}
}

// fileClientID is the client_id of one message of the file key.
func fileClientID(key, part string) string {
	sum := sha256.Sum256([]byte("file\x00" + key + "\x00" + part))
	return "parley-" + hex.EncodeToString(sum[:12])
}

// encryptECB is iLink's CDN scheme: AES-128-ECB with PKCS#7 padding.
func encryptECB(data, key []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	pad := aes.BlockSize - len(data)%aes.BlockSize
	out := make([]byte, len(data)+pad)
	copy(out, data)
	for i := len(data); i < len(out); i++ {
		out[i] = byte(pad)
	}
	for i := 0; i < len(out); i += aes.BlockSize {
		block.Encrypt(out[i:i+aes.BlockSize], out[i:i+aes.BlockSize])
	}
	return out, nil
}
