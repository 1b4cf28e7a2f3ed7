package wxapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wxcrypto"
)

// ImageAttachments describes the image of a callback's image message: its
// MediaId, downloaded later with Media and the access token (both
// platforms keep it three days). The PicUrl sent with it is not used: the
// API needs no address check. Other messages have none.
func ImageAttachments(msg wxcrypto.Message) []channels.Attachment {
	if msg.MsgType != "image" || msg.MediaID == "" {
		return nil
	}
	return []channels.Attachment{{Kind: channels.AttachmentImage, ID: msg.MediaID}}
}

// MediaPath is both platforms' temporary-media download,
// GET /cgi-bin/media/get?access_token=…&media_id=… .
const MediaPath = "/cgi-bin/media/get"

// CodeInvalidMediaID is the errcode of a media_id the platform does not
// know (never valid, or past its three days).
const CodeInvalidMediaID = 40007

// maxMediaError bounds what is read of a download's error answer.
const maxMediaError = 64 << 10

// Media downloads the temporary media mediaID with the access token and
// returns its body capped at limit: an announced length over limit fails
// at once with channels.ErrAttachmentTooLarge, and the reader fails with it
// one byte past limit. An answer in JSON is the platform's errcode: a
// rejected token is renewed and the download tried once more, an unknown
// media_id is channels.ErrAttachmentNotFound, other codes an *APIError.
func (c *Client) Media(ctx context.Context, mediaID string, limit int64) (io.ReadCloser, error) {
	const op = "media/get"
	for attempt := 0; ; attempt++ {
		token, err := c.Tokens.Get(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		body, err := c.mediaOnce(ctx, op, token, mediaID, limit)
		var apiErr *APIError
		if attempt == 0 && errors.As(err, &apiErr) && apiErr.Status == 0 && tokenRejected(apiErr.Code) {
			if _, ierr := c.Tokens.Invalidate(ctx, token); ierr != nil {
				return nil, fmt.Errorf("%w (%w)", err, ierr)
			}
			continue
		}
		return body, err
	}
}

func (c *Client) mediaOnce(ctx context.Context, op, token, mediaID string, limit int64) (io.ReadCloser, error) {
	q := url.Values{"access_token": {token}, "media_id": {mediaID}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.BaseURL, "/")+MediaPath+"?"+q.Encode(), nil)
	if err != nil {
		return nil, newTransportError(op, err)
	}
	client := *c.HTTP
	client.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		// The download stays on the API's host.
		if len(via) >= 3 || !strings.EqualFold(r.URL.Host, via[0].URL.Host) || r.URL.Scheme != via[0].URL.Scheme {
			return fmt.Errorf("redirect to %q refused", r.URL.Host)
		}
		return nil
	}
	c.countCall(op)
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			c.count("network")
		}
		// The URL carries the token: name the operation, not the URL.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, newTransportError(op, err)
	}
	if resp.StatusCode/100 != 2 {
		resp.Body.Close()
		e := &APIError{Op: op, Status: resp.StatusCode}
		c.count(e.label(c.Codes))
		return nil, fmt.Errorf("%w: %w", e, channels.HTTPStatusError(resp.StatusCode))
	}
	ct := resp.Header.Get("Content-Type")
	if strings.Contains(ct, "json") || strings.HasPrefix(ct, "text/plain") {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxMediaError))
		var status struct {
			ErrCode int    `json:"errcode"`
			ErrMsg  string `json:"errmsg"`
		}
		if json.Unmarshal(raw, &status) != nil || status.ErrCode == 0 {
			c.count("bad_response")
			return nil, newTransportError(op, fmt.Errorf("%w: a %s answer without an errcode", errBadResponse, ct))
		}
		e := &APIError{Op: op, Code: status.ErrCode, Msg: status.ErrMsg}
		c.count(e.label(c.Codes))
		if status.ErrCode == CodeInvalidMediaID {
			return nil, fmt.Errorf("%w: %w", e, channels.ErrAttachmentNotFound)
		}
		return nil, e
	}
	if limit > 0 && resp.ContentLength > limit {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: media of %d bytes: %w", op, resp.ContentLength, channels.ErrAttachmentTooLarge)
	}
	return channels.CapBody(resp.Body, limit), nil
}
