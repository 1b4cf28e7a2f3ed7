package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/parleyhq/parley/agent"
)

// Limits of web_fetch that are not configuration: they protect the model's
// context and the gateway, whatever the operator sets.
const (
	// maxRedirects is how many redirects one fetch follows.
	maxRedirects = 5
	// maxURLBytes refuses URLs no page needs and that would crowd a result.
	maxURLBytes = 2048
	// maxHeaderBytes bounds a response's headers.
	maxHeaderBytes = 64 << 10
	// userAgent says who is asking; sites that refuse bots then refuse
	// honestly instead of serving a page meant for a browser.
	userAgent = "Mozilla/5.0 (compatible; Parley-web_fetch/1.0; +https://github.com/parleyhq/parley)"
	accept    = "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.9,application/json;q=0.8,*/*;q=0.5"
)

var errTooManyRedirects = fmt.Errorf("stopped after %d redirects", maxRedirects)

// fetchTool is web_fetch.
type fetchTool struct {
	cfg    FetchConfig
	guard  *guard
	client *http.Client
	render *renderer
	log    *slog.Logger
}

var _ agent.Tool = (*fetchTool)(nil)

func newFetchTool(cfg FetchConfig, deps Deps) (*fetchTool, error) {
	allow, err := parseAllowList(cfg.AllowPrivate)
	if err != nil {
		return nil, fmt.Errorf("web: tools.web_fetch.allow_private: %w", err)
	}
	f := &fetchTool{
		cfg:    cfg,
		guard:  newGuard(allow, deps.Resolver, deps.Dialer),
		render: newRenderer(),
		log:    deps.Logger.With("tool", "web_fetch"),
	}
	f.client = &http.Client{
		Transport: &http.Transport{
			// No proxy from the environment: a proxy would connect, on our
			// behalf, to an address the guard never saw.
			Proxy:                  nil,
			DialContext:            f.guard.DialContext,
			ForceAttemptHTTP2:      true,
			TLSHandshakeTimeout:    10 * time.Second,
			ResponseHeaderTimeout:  cfg.Timeout,
			MaxResponseHeaderBytes: maxHeaderBytes,
			MaxIdleConns:           16,
			IdleConnTimeout:        60 * time.Second,
		},
		CheckRedirect: f.checkRedirect,
	}
	return f, nil
}

func (*fetchTool) Name() string { return "web_fetch" }

func (*fetchTool) Description() string {
	return "Fetch a public web page or text document (http or https) and return its main content as Markdown, links kept, " +
		"in pages of up to 16 KiB; when more follows, call again with the offset it gives. " +
		"Reads HTML, plain text, Markdown, JSON and XML; refuses private and internal addresses. Use web_search to find URLs."
}

// fetchToolParams is fetchTool's schema, made once: a conversion in
// Parameters would copy it for every request.
var fetchToolParams = json.RawMessage(`{"type":"object","properties":{` +
	`"url":{"type":"string","description":"absolute http or https URL"},` +
	`"offset":{"type":"integer","minimum":0,"description":"byte offset to continue reading from, as given by the previous page"}},` +
	`"required":["url"],"additionalProperties":false}`)

func (*fetchTool) Parameters() json.RawMessage { return fetchToolParams }

func (*fetchTool) Writes() bool { return false }

func (f *fetchTool) Call(ctx context.Context, tc *agent.TurnContext, raw json.RawMessage) (agent.Result, error) {
	var args struct {
		URL    string `json:"url"`
		Offset int    `json:"offset"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return agent.Result{}, fmt.Errorf("arguments: %w", err)
	}
	if args.Offset < 0 {
		return agent.Result{}, errors.New("offset must be 0 or more")
	}
	if len(args.URL) > maxURLBytes {
		return agent.Result{}, fmt.Errorf("refused: the URL is longer than %d bytes", maxURLBytes)
	}
	t, err := f.guard.checkURL(args.URL)
	if err != nil {
		f.logRefusal(ctx, tc, err)
		return agent.Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	doc, err := f.fetch(ctx, t.url)
	if err != nil {
		f.logRefusal(ctx, tc, err)
		return agent.Result{}, f.explain(ctx, err, t.url)
	}
	text, err := f.render.document(ctx, doc)
	if err != nil {
		return agent.Result{}, err
	}
	content, err := formatPage(doc, text, args.Offset)
	if err != nil {
		return agent.Result{}, err
	}
	return agent.Result{Content: content}, nil
}

// checkRedirect applies the guard's static checks to every redirect; the
// dialer checks the addresses when the redirect connects.
func (f *fetchTool) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return errTooManyRedirects
	}
	if len(req.URL.String()) > maxURLBytes {
		return fmt.Errorf("refused: a redirect to a URL longer than %d bytes", maxURLBytes)
	}
	_, err := f.guard.checkParsed(req.URL)
	return err
}

// document is a fetched body, decoded to UTF-8.
type document struct {
	url       *url.URL // after redirects
	mediaType string   // as the server declared it, without parameters
	html      bool
	body      string
	size      int64 // bytes read, before decoding
	truncated bool  // the body was longer than MaxBytes
}

func (f *fetchTool) fetch(ctx context.Context, u *url.URL) (document, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return document{}, err
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", accept)
	resp, err := f.client.Do(req)
	if err != nil {
		return document{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return document{}, statusError(resp)
	}
	contentType := resp.Header.Get("Content-Type")
	mediaType, _, _ := mime.ParseMediaType(contentType)
	// The transport has already undone gzip, so the cap counts the
	// decompressed bytes and a compression bomb stops at MaxBytes.
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxBytes+1))
	if err != nil {
		return document{}, err
	}
	doc := document{url: resp.Request.URL, mediaType: mediaType, size: int64(len(body))}
	if int64(len(body)) > f.cfg.MaxBytes {
		body, doc.truncated, doc.size = body[:f.cfg.MaxBytes], true, f.cfg.MaxBytes
	}
	if doc.html, err = classifyBody(mediaType, body); err != nil {
		return document{}, err
	}
	doc.body = decodeText(body, contentType, doc.truncated)
	return doc, nil
}

// statusError describes a non-2xx answer; the body is not read, because an
// error page is not the content the model asked for.
func statusError(resp *http.Response) error {
	status := resp.Status
	if status == "" {
		status = fmt.Sprint(resp.StatusCode)
	}
	hint := ""
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired:
		hint = " (the site wants a login or refuses automated readers)"
	case http.StatusTooManyRequests:
		hint = " (the site is rate limiting; try later or another source)"
	case http.StatusUnavailableForLegalReasons:
		hint = " (unavailable for legal reasons)"
	case http.StatusNotFound, http.StatusGone:
		hint = " (no such page)"
	}
	return fmt.Errorf("%s answered HTTP %s%s", resp.Request.URL.Redacted(), status, hint)
}

// explain turns a transport error into words for the model: the guard's
// refusal as it is, a timeout as a timeout, and no wrapping that repeats the
// URL three times.
func (f *fetchTool) explain(ctx context.Context, err error, u *url.URL) error {
	var blocked *BlockedError
	switch {
	case errors.As(err, &blocked):
		return blocked
	case errors.Is(err, errTooManyRedirects):
		return fmt.Errorf("%s: %w", u.Redacted(), errTooManyRedirects)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || isTimeout(err):
		// The call's deadline and the transport's wait for headers are the
		// same timeout; whichever notices first, the model reads the same
		// words and the call counts as timed out.
		return &timeoutError{msg: fmt.Sprintf("%s: timed out after %s", u.Redacted(), f.cfg.Timeout)}
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return fmt.Errorf("fetching %s: %w", u.Redacted(), err)
}

// logRefusal records what the guard refused: the host and the class, never
// the path or query, which may carry tokens.
func (f *fetchTool) logRefusal(ctx context.Context, tc *agent.TurnContext, err error) {
	var blocked *BlockedError
	if errors.As(err, &blocked) {
		f.log.InfoContext(ctx, "web_fetch refused an address", "host", blocked.Host, "class", blocked.Class, "channel", tc.Channel)
	}
}

// timeoutError is a call that ran out of its own time. It is a
// context.DeadlineExceeded, so the agent counts the call as a timeout, but
// its message says so in the model's words.
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string        { return e.msg }
func (e *timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// isTimeout reports whether err is a network timeout (a dial, the wait for
// response headers, the client's own deadline).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
