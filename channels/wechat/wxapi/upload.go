package wxapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/retry"
)

// MediaUploadPath is both platforms' temporary-media upload,
// POST /cgi-bin/media/upload?access_token=…&type=image|voice|video|file
// (WeCom) or image|voice|video|thumb (Official Accounts), the file in
// the multipart field "media". The media_id it answers is good for three
// days.
const MediaUploadPath = "/cgi-bin/media/upload"

// UploadMedia uploads data as temporary media of kind (image, file, …)
// named name, of MIME type typ, and returns its media_id. It is one try:
// a token the platform rejects is renewed and the upload made once more,
// nothing else is repeated. The error is an *APIError when the platform
// answered, and never shows the URL (whose query holds the token).
func (c *Client) UploadMedia(ctx context.Context, kind, name, typ string, data []byte) (string, error) {
	const op = "media/upload"
	body, contentType, err := mediaForm(name, typ, data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	for attempt := 0; ; attempt++ {
		token, err := c.Tokens.Get(ctx)
		if err != nil {
			return "", fmt.Errorf("%s: %w", op, err)
		}
		var out struct {
			MediaID string `json:"media_id"`
		}
		err = c.uploadOnce(ctx, op, url.Values{"access_token": {token}, "type": {kind}}, body, contentType, &out)
		var apiErr *APIError
		if attempt == 0 && errors.As(err, &apiErr) && apiErr.Status == 0 && tokenRejected(apiErr.Code) {
			if _, ierr := c.Tokens.Invalidate(ctx, token); ierr != nil {
				return "", fmt.Errorf("%w (%w)", err, ierr)
			}
			continue
		}
		if err == nil && out.MediaID == "" {
			c.count("bad_response")
			err = newTransportError(op, fmt.Errorf("%w: no media_id", errBadResponse))
		}
		return out.MediaID, err
	}
}

// mediaForm is the multipart body of an upload: the one part "media",
// with its filename, length and type.
func mediaForm(name, typ string, data []byte) ([]byte, string, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="media"; filename=%q; filelength=%d`, name, len(data)))
	h.Set("Content-Type", typ)
	part, err := w.CreatePart(h)
	if err != nil {
		return nil, "", err
	}
	if _, err := part.Write(data); err != nil {
		return nil, "", err
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), w.FormDataContentType(), nil
}

// uploadOnce POSTs one multipart body and decodes the JSON answer as do
// does.
func (c *Client) uploadOnce(ctx context.Context, op string, q url.Values, body []byte, contentType string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+MediaUploadPath+"?"+q.Encode(), bytes.NewReader(body))
	if err != nil {
		return newTransportError(op, err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Content-Length", strconv.Itoa(len(body)))
	c.countCall(op)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			c.count("network")
		}
		return newTransportError(op, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		c.count("network")
		return newTransportError(op, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &APIError{Op: op, Status: resp.StatusCode}
		c.count(e.label(c.Codes))
		return e
	}
	var status struct {
		ErrCode int    `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
	}
	if json.Unmarshal(raw, &status) != nil || json.Unmarshal(raw, out) != nil {
		c.count("bad_response")
		return newTransportError(op, errBadResponse)
	}
	if status.ErrCode != 0 {
		e := &APIError{Op: op, Code: status.ErrCode, Msg: status.ErrMsg}
		c.count(e.label(c.Codes))
		return e
	}
	return nil
}

// SendError is a failed step of sending a file, as a *channels.PostError
// for the outbox: busy and rate-limit errcodes, a rejected token (renewed
// by now), 429 and 5xx, and a dropped connection may pass; a refused
// errcode and an unreadable answer do not. A request that may have landed
// is worth another try here, unlike for Call: a file's steps are made
// safe to repeat by the caller (an upload shows nothing; a message is
// sent with the platform's duplicate check), and so is a token that could
// not be had just now. nil for nil; a cancelled ctx
// gives its error as it is.
func SendError(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	var pe *channels.PostError
	var apiErr *APIError
	var terr *transportError
	switch {
	case errors.As(err, &pe): // classified already
		return &channels.PostError{Retry: pe.Retry, After: pe.After, Err: err}
	case errors.As(err, &apiErr):
		again, reason := apiErr.classify()
		if apiErr.Status == 0 && tokenRejected(apiErr.Code) {
			again, reason = true, retry.ClientError
		}
		return &channels.PostError{Retry: again, Err: retry.Mark(reason, err)}
	case errors.As(err, &terr):
		if errors.Is(err, errBadResponse) {
			return &channels.PostError{Err: retry.Mark(retry.BadResponse, err)}
		}
		return &channels.PostError{Retry: true, Err: retry.Mark(retry.ReasonOf(err, 0), err)}
	case errors.Is(err, ErrRefreshFailed), errors.Is(err, ErrForceLimited):
		// No token for now: the token endpoint may be back on the next try.
		return &channels.PostError{Retry: true, Err: err}
	}
	return &channels.PostError{Err: err}
}
