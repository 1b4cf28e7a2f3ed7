package slack

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
)

// Files shared with a message. An event's files array becomes the
// message's attachments; FetchAttachment downloads one from its
// url_private_download with the bot token, from Slack's own file host
// only (files.slack.com, or the host of the configured API URL, where a
// test's fake or a private deployment serves them), following redirects
// only among those hosts, so that no URL in an event can point the bot
// token, or the gateway, at another address.

var _ channels.AttachmentFetcher = (*Adapter)(nil)

// filesHost is where Slack serves url_private.
const filesHost = "files.slack.com"

// maxFileRedirects bounds the redirects of one download.
const maxFileRedirects = 3

// errNoScope is a file URL answered with Slack's sign-in page: the token
// lacks the files:read scope.
var errNoScope = fmt.Errorf("%w: the bot token cannot read files (add the files:read scope)", channels.ErrAttachmentForbidden)

// eventFile is the part of a file object of an event the adapter reads.
type eventFile struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Mimetype           string `json:"mimetype"`
	Size               int64  `json:"size"`
	Mode               string `json:"mode"`
	URLPrivate         string `json:"url_private"`
	URLPrivateDownload string `json:"url_private_download"`
}

// eventFiles returns the attachments of an event: its hosted files (not
// external links, not files hidden by the workspace's plan or deleted).
func eventFiles(raw json.RawMessage) []channels.Attachment {
	if len(raw) == 0 {
		return nil
	}
	var files []eventFile
	if json.Unmarshal(raw, &files) != nil {
		return nil
	}
	var out []channels.Attachment
	for _, f := range files {
		u := f.URLPrivateDownload
		if u == "" {
			u = f.URLPrivate
		}
		if f.ID == "" || u == "" || f.Mode == "external" || f.Mode == "tombstone" || f.Mode == "hidden_by_limit" {
			continue
		}
		kind := channels.AttachmentFile
		if strings.HasPrefix(f.Mimetype, "image/") {
			kind = channels.AttachmentImage
		}
		out = append(out, channels.Attachment{Kind: kind, ID: f.ID, Name: f.Name, MIME: f.Mimetype, Size: f.Size,
			Meta: map[string]string{"url": u}})
	}
	return out
}

// fileHosts are the hosts a file may be downloaded from, and whether
// plain http is allowed for the API URL's (a local fake).
func (a *Adapter) fileHostAllowed(u *url.URL) bool {
	api, err := url.Parse(a.cfg.APIURL)
	if err != nil {
		return false
	}
	switch {
	case u.User != nil:
		return false
	case strings.EqualFold(u.Host, api.Host):
		return u.Scheme == api.Scheme || u.Scheme == "https"
	case strings.EqualFold(u.Hostname(), filesHost) && (u.Port() == "" || u.Port() == "443"):
		return u.Scheme == "https"
	}
	return false
}

// FetchAttachment implements channels.AttachmentFetcher.
func (a *Adapter) FetchAttachment(ctx context.Context, _ channels.Message, att channels.Attachment, limit int64) (io.ReadCloser, error) {
	u, err := url.Parse(att.Meta["url"])
	if err != nil || !a.fileHostAllowed(u) {
		return nil, fmt.Errorf("%w: the file is not on Slack's file host", channels.ErrAttachmentForbidden)
	}
	if limit > 0 && att.Size > limit {
		return nil, channels.ErrAttachmentTooLarge
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("slack: file request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+a.cfg.BotToken.Reveal())
	client := *a.opts.HTTPClient
	client.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) > maxFileRedirects || !a.fileHostAllowed(r.URL) {
			return errOffHost
		}
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, errOffHost) {
			return nil, fmt.Errorf("%w: the download redirected away from Slack's file host", channels.ErrAttachmentForbidden)
		}
		// The URL is left out: it names the workspace's file.
		return nil, fmt.Errorf("slack: file download failed: %w", errors.Unwrap(err))
	}
	if err := channels.HTTPStatusError(resp.StatusCode); err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("slack: %w", err)
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "text/html") && !strings.HasPrefix(att.MIME, "text/html") {
		resp.Body.Close()
		return nil, errNoScope
	}
	if limit > 0 && resp.ContentLength > limit {
		resp.Body.Close()
		return nil, channels.ErrAttachmentTooLarge
	}
	return channels.CapBody(resp.Body, limit), nil
}

// errOffHost stops a redirect away from the file hosts.
var errOffHost = errors.New("slack: redirect off the file host")
