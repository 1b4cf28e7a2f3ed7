package feishu

// Images and files in messages: what an image, file or post message
// carries is described as channels.Attachments (image_key or file_key and
// the message id), and FetchAttachment downloads one through the
// message-resource API with the tenant token, streaming, never reading
// past the limit it is given.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/internal/ident"
)

// Meta keys of a Feishu attachment.
const (
	// AttachMessageID is the message the resource belongs to: the
	// message-resource API wants it along with the key.
	AttachMessageID = "message_id"
)

// ResourcePath is the message-resource API's route.
const ResourcePath = "/open-apis/im/v1/messages/:message_id/resources/:file_key"

// maxErrorBody bounds what is read of a download's error answer.
const maxErrorBody = 64 << 10

// isResourceKey says whether k looks like a message id, image_key or
// file_key (om_…, img_v3_…, file_v3_…), 1–256 of keyChars: it goes into
// the request path, so anything else is refused before a request is made.
func isResourceKey(k string) bool { return keyChars.Match(k, 1, 256) }

// keyChars are the bytes of Feishu's ids and keys (messages, cards,
// users, images, files).
var keyChars = ident.Of("A-Za-z0-9_-")

var _ channels.AttachmentFetcher = (*Adapter)(nil)

// messageAttachments describes the images and files an image, file or post
// message carries. Other types (and a malformed content) carry none.
func messageAttachments(msgType, content, messageID string) []channels.Attachment {
	meta := func() map[string]string { return map[string]string{AttachMessageID: messageID} }
	switch msgType {
	case "image":
		var c struct {
			ImageKey string `json:"image_key"`
		}
		if json.Unmarshal([]byte(content), &c) != nil || c.ImageKey == "" {
			return nil
		}
		return []channels.Attachment{{Kind: channels.AttachmentImage, ID: c.ImageKey, Meta: meta()}}
	case "file":
		var c struct {
			FileKey  string `json:"file_key"`
			FileName string `json:"file_name"`
		}
		if json.Unmarshal([]byte(content), &c) != nil || c.FileKey == "" {
			return nil
		}
		return []channels.Attachment{{Kind: channels.AttachmentFile, ID: c.FileKey, Name: c.FileName, Meta: meta()}}
	case "post":
		var out []channels.Attachment
		for _, key := range postImageKeys(content) {
			out = append(out, channels.Attachment{Kind: channels.AttachmentImage, ID: key, Meta: meta()})
		}
		return out
	}
	return nil
}

// postImageKeys lists the image_keys of a post's img elements, in order,
// each once. A received post is {"title","content"}; a locale-wrapped one
// is read too, as flattenPost does.
func postImageKeys(content string) []string {
	type el struct {
		Tag      string `json:"tag"`
		ImageKey string `json:"image_key"`
	}
	type body struct {
		Content [][]el `json:"content"`
	}
	var bodies []body
	var p body
	if json.Unmarshal([]byte(content), &p) == nil && p.Content != nil {
		bodies = append(bodies, p)
	} else {
		var byLocale map[string]json.RawMessage
		if json.Unmarshal([]byte(content), &byLocale) != nil {
			return nil
		}
		for _, loc := range []string{"zh_cn", "en_us", "ja_jp"} {
			var b body
			if raw, ok := byLocale[loc]; ok && json.Unmarshal(raw, &b) == nil && b.Content != nil {
				bodies = append(bodies, b)
				break
			}
		}
	}
	var keys []string
	seen := map[string]bool{}
	for _, b := range bodies {
		for _, para := range b.Content {
			for _, e := range para {
				if e.Tag == "img" && e.ImageKey != "" && !seen[e.ImageKey] {
					seen[e.ImageKey] = true
					keys = append(keys, e.ImageKey)
				}
			}
		}
	}
	return keys
}

// FetchAttachment implements channels.AttachmentFetcher: GET the message
// resource (type image or file) with the tenant token. The body is
// streamed: an announced length over limit fails at once, and the reader
// fails with channels.ErrAttachmentTooLarge one byte past limit.
func (a *Adapter) FetchAttachment(ctx context.Context, m channels.Message, att channels.Attachment, limit int64) (io.ReadCloser, error) {
	messageID := att.Meta[AttachMessageID]
	if !isResourceKey(messageID) || !isResourceKey(att.ID) {
		return nil, fmt.Errorf("feishu: attachment: malformed message id or key")
	}
	typ := "file"
	if att.Kind == channels.AttachmentImage {
		typ = "image"
	}
	body, err := a.openResource(ctx, messageID, att.ID, typ)
	if err != nil {
		return nil, err
	}
	if limit > 0 && body.length > limit {
		body.Close()
		return nil, fmt.Errorf("feishu: attachment of %d bytes: %w", body.length, channels.ErrAttachmentTooLarge)
	}
	return channels.CapBody(body, limit), nil
}

// resourceBody is an open download.
type resourceBody struct {
	io.ReadCloser
	length int64 // Content-Length; -1 when not announced
}

// openResource makes the request through the SDK, so that its token
// manager supplies (and on an expired-token answer renews) the tenant
// token, but keeps the answer's body from it: the SDK reads a whole body
// into memory, so the request goes out through a client that hands a
// successful download's stream here and the SDK an empty body.
func (a *Adapter) openResource(ctx context.Context, messageID, key, typ string) (*resourceBody, error) {
	hc := &streamCapture{inner: sameHostOnly(a.api.HttpClient), suffix: "/resources/" + key}
	cfg := *a.api
	cfg.HttpClient = hc
	req := &larkcore.ApiReq{
		HttpMethod:                http.MethodGet,
		ApiPath:                   ResourcePath,
		PathParams:                larkcore.PathParams{"message_id": messageID, "file_key": key},
		QueryParams:               larkcore.QueryParams{"type": []string{typ}},
		SupportedAccessTokenTypes: []larkcore.AccessTokenType{larkcore.AccessTokenTypeTenant},
	}
	resp, err := larkcore.Request(ctx, req, &cfg, larkcore.WithFileDownload())
	stream := hc.take()
	if err != nil {
		if stream != nil {
			stream.Body.Close()
		}
		a.m.ChannelAPIErrors.WithLabelValues(Name, "network").Inc()
		return nil, fmt.Errorf("feishu: download %s: %w", typ, err)
	}
	if stream == nil || resp.StatusCode != http.StatusOK {
		if stream != nil {
			stream.Body.Close()
		}
		a.m.ChannelAPIErrors.WithLabelValues(Name, "http_"+strconv.Itoa(resp.StatusCode)).Inc()
		return nil, downloadError(typ, resp)
	}
	return &resourceBody{ReadCloser: stream.Body, length: stream.ContentLength}, nil
}

// downloadError describes a failed download: the HTTP status as the
// channels errors (403 forbidden, 404 gone…), with Feishu's code and log
// id when the answer was its JSON envelope.
func downloadError(typ string, resp *larkcore.ApiResp) error {
	status := resp.StatusCode
	var res apiResult
	detail := ""
	if json.Unmarshal(resp.RawBody, &res) == nil && (res.Code != 0 || res.Msg != "") {
		detail = fmt.Sprintf(": code %d: %s", res.Code, res.Msg)
		if res.Error != nil && res.Error.LogID != "" {
			detail += " (log_id " + res.Error.LogID + ")"
		}
	}
	if status == http.StatusOK {
		// A JSON answer with status 200 is a refusal with a code.
		return fmt.Errorf("feishu: download %s%s: %w", typ, detail, channels.ErrAttachmentForbidden)
	}
	return fmt.Errorf("feishu: download %s%s: %w", typ, detail, channels.HTTPStatusError(status))
}

// sameHostOnly is hc refusing a redirect to another host: a download
// stays on the Open API's host.
func sameHostOnly(hc larkcore.HttpClient) larkcore.HttpClient {
	c, ok := hc.(*http.Client)
	if !ok {
		return hc
	}
	cp := *c
	cp.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) >= 3 || !strings.EqualFold(r.URL.Host, via[0].URL.Host) || r.URL.Scheme != via[0].URL.Scheme {
			return fmt.Errorf("redirect to %q refused", r.URL.Host)
		}
		return nil
	}
	return &cp
}

// streamCapture is the HTTP client of one download. The answer to the
// resource request, when it is a successful non-JSON download, is kept
// here with its body unread, and the SDK gets an empty body; an error
// answer is passed on, cut to maxErrorBody, for the SDK to read its code
// (and renew an expired token). Other requests (the token's) pass through.
type streamCapture struct {
	inner  larkcore.HttpClient
	suffix string

	mu   sync.Mutex
	resp *http.Response
}

func (c *streamCapture) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.inner.Do(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, c.suffix) {
		return resp, err
	}
	if resp.StatusCode != http.StatusOK || strings.Contains(resp.Header.Get("Content-Type"), "json") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return resp, nil
	}
	c.mu.Lock()
	if c.resp != nil {
		c.resp.Body.Close()
	}
	c.resp = resp
	c.mu.Unlock()
	stub := *resp
	stub.Body = http.NoBody
	return &stub, nil
}

// take hands over the kept answer, if any.
func (c *streamCapture) take() *http.Response {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.resp
	c.resp = nil
	return r
}
