package wxapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/retry"
)

// maxResponse bounds an API answer; the platforms' are a few hundred bytes.
const maxResponse = 1 << 20

// Errcodes both platforms answer with.
const (
	CodeBusy            = -1    // system busy: try again
	CodeInvalidCred     = 40001 // bad secret (token fetch) or a stale token (other calls)
	CodeInvalidToken    = 40014 // invalid access_token
	CodeTokenExpired    = 42001 // access_token expired
	CodeFrequencyLimit  = 45009 // API call frequency out of limit
	CodeMinuteQuota     = 45011 // per-minute quota reached
	CodeOAIPNotTrusted  = 40164 // Official Account: the caller's IP is not on the allowlist
	CodeAppIPNotTrusted = 60020 // WeCom: the caller's IP is not a trusted IP
)

// commonCodes are the label values both platforms share.
var commonCodes = []int{CodeBusy, CodeInvalidCred, 40013, CodeInvalidToken, CodeTokenExpired, CodeFrequencyLimit, CodeMinuteQuota, 48001, 40125, CodeOAIPNotTrusted, CodeAppIPNotTrusted}

// Codes is a platform's closed set of errcode labels for
// parley_channel_api_errors_total: the codes an operator acts on. Every
// other errcode is counted as "other" (and logged with its number), and
// transport failures as "network", "http_4xx", "http_5xx" or
// "bad_response", so the label's values stay a fixed set.
type Codes map[int]string

// NewCodes is the shared codes plus a platform's own.
func NewCodes(own ...int) Codes {
	c := Codes{}
	for _, code := range append(commonCodes, own...) {
		c[code] = strconv.Itoa(code)
	}
	return c
}

// Label is code's label.
func (c Codes) Label(code int) string {
	if l, ok := c[code]; ok {
		return l
	}
	return "other"
}

// APIError is a call the platform answered with a non-zero errcode, or
// with an HTTP error status (Code 0).
type APIError struct {
	Op     string
	Code   int
	Msg    string
	Status int
}

func (e *APIError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s: HTTP %d", e.Op, e.Status)
	}
	return fmt.Sprintf("%s: errcode %d: %s", e.Op, e.Code, e.Msg)
}

// label is e's code label under codes.
func (e *APIError) label(codes Codes) string {
	switch {
	case e.Status >= 500:
		return "http_5xx"
	case e.Status != 0:
		return "http_4xx"
	}
	return codes.Label(e.Code)
}

// classify says whether the call may be sent again and why it failed.
func (e *APIError) classify() (bool, retry.Reason) {
	if e.Status != 0 {
		return retry.RetryableStatus(e.Status), retry.StatusReason(e.Status)
	}
	switch e.Code {
	case CodeBusy:
		return true, retry.ServerError
	case CodeFrequencyLimit, CodeMinuteQuota:
		return true, retry.RateLimited
	}
	return false, retry.ClientError
}

// tokenRejected reports an errcode that means the token is no longer good.
func tokenRejected(code int) bool {
	return code == CodeInvalidToken || code == CodeTokenExpired || code == CodeInvalidCred
}

// errBadResponse marks an answer that is not the JSON it should be.
var errBadResponse = errors.New("the answer is not valid JSON")

// transportError is a call that got no answer. Its message never carries
// the URL, whose query holds the access token or the secret.
type transportError struct {
	op  string
	err error
	// unsent reports that the request certainly never reached the
	// platform (the connection was not made), so it is safe to send again.
	unsent bool
}

func (e *transportError) Error() string { return e.op + ": " + e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

func newTransportError(op string, err error) *transportError {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // without the URL
	}
	var oerr *net.OpError
	unsent := errors.As(err, &oerr) && oerr.Op == "dial"
	return &transportError{op: op, err: err, unsent: unsent}
}

// Client calls one account's JSON API with its access token.
type Client struct {
	// Channel is the platform name, the channel label of the metrics.
	Channel string
	// BaseURL is the API host, e.g. https://api.weixin.qq.com.
	BaseURL string
	HTTP    *http.Client
	// Tokens is the account's access token; nil for calls without one
	// (fetching the token itself).
	Tokens  *Tokens
	Codes   Codes
	Retrier *retry.Retrier
	Metrics *metrics.Metrics
}

// Call POSTs body as JSON to path with the access token, on the retry loop,
// and decodes the answer into out (when non-nil). A token the platform
// rejects is dropped (Tokens.Invalidate) and the call tried again with a
// new one. Failures are counted by errcode label. The returned error is an
// *APIError when the platform answered.
func (c *Client) Call(ctx context.Context, op, path string, body, out any) error {
	return c.CallWith(ctx, c.Retrier, op, path, body, out)
}

// CallWith is Call on another retrier (fewer attempts, for a typing
// indicator).
func (c *Client) CallWith(ctx context.Context, r *retry.Retrier, op, path string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return r.Do(ctx, op, func(ctx context.Context) (bool, time.Duration, error) {
		token, err := c.Tokens.Get(ctx)
		if err != nil {
			if errors.Is(err, ErrRefreshFailed) {
				// The fetch counted and classified its own failure.
				return false, 0, retry.Mark(retry.ClientError, fmt.Errorf("%s: %w", op, err))
			}
			return false, 0, fmt.Errorf("%s: %w", op, err)
		}
		q := url.Values{"access_token": {token}}
		err = c.do(ctx, http.MethodPost, op, path, q, raw, out)
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.Status == 0 && tokenRejected(apiErr.Code) {
			wait, ierr := c.Tokens.Invalidate(ctx, token)
			if errors.Is(ierr, ErrForceLimited) {
				return true, wait, retry.Mark(retry.RateLimited, fmt.Errorf("%w (%w)", err, ierr))
			}
			if ierr != nil {
				return false, 0, fmt.Errorf("%w (%w)", err, ierr)
			}
			return true, 0, retry.Mark(retry.ClientError, err)
		}
		return c.classify(err)
	})
}

// classify turns a call's error into the retry loop's verdict.
func (c *Client) classify(err error) (bool, time.Duration, error) {
	if err == nil {
		return false, 0, nil
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		again, reason := apiErr.classify()
		return again, 0, retry.Mark(reason, err)
	}
	var terr *transportError
	if errors.As(err, &terr) {
		if errors.Is(err, errBadResponse) {
			return false, 0, retry.Mark(retry.BadResponse, err)
		}
		// A request that may have landed is not sent again: the user
		// would read the answer twice.
		return terr.unsent, 0, err
	}
	return false, 0, err
}

// Get is an unauthenticated GET (the token fetch), on the client's retry
// loop, decoded into out.
func (c *Client) Get(ctx context.Context, op, path string, query url.Values, out any) error {
	return c.Retrier.Do(ctx, op, func(ctx context.Context) (bool, time.Duration, error) {
		return c.classify(c.do(ctx, http.MethodGet, op, path, query, nil, out))
	})
}

// do sends one request and decodes the answer. A non-zero errcode is an
// *APIError, after out is filled.
func (c *Client) do(ctx context.Context, method, op, path string, query url.Values, body []byte, out any) error {
	u := strings.TrimRight(c.BaseURL, "/") + path + "?" + query.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return newTransportError(op, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
	}
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
	if err := json.Unmarshal(raw, &status); err != nil {
		c.count("bad_response")
		return newTransportError(op, fmt.Errorf("%w: %v", errBadResponse, err))
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.count("bad_response")
			return newTransportError(op, fmt.Errorf("%w: %v", errBadResponse, err))
		}
	}
	if status.ErrCode != 0 {
		e := &APIError{Op: op, Code: status.ErrCode, Msg: status.ErrMsg}
		c.count(e.label(c.Codes))
		return e
	}
	return nil
}

func (c *Client) count(label string) {
	c.Metrics.ChannelAPIErrors.WithLabelValues(c.Channel, label).Inc()
}

// countCall counts one request of op in parley_platform_calls_total, each
// try on its own, as the platform's quota counts them.
func (c *Client) countCall(op string) {
	c.Metrics.PlatformCalls.WithLabelValues(c.Channel, op).Inc()
}

// TokenAnswer is the answer of both platforms' token endpoints.
type TokenAnswer struct {
	AccessToken string `json:"access_token"`
	ExpiresIn   int    `json:"expires_in"` // seconds
}

// FetchToken returns a Fetch that GETs path with query (which carries the
// account's secret — it never reaches an error or a log) and reads the
// token out of the answer.
func (c *Client) FetchToken(op, path string, query func() url.Values) Fetch {
	return func(ctx context.Context) (string, time.Duration, error) {
		var a TokenAnswer
		if err := c.Get(ctx, op, path, query(), &a); err != nil {
			return "", 0, withHint(err)
		}
		return a.AccessToken, time.Duration(a.ExpiresIn) * time.Second, nil
	}
}

// withHint adds what to check to the errcodes an operator must act on.
func withHint(err error) error {
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		return err
	}
	switch apiErr.Code {
	case CodeOAIPNotTrusted, CodeAppIPNotTrusted:
		return fmt.Errorf("%w (add this server's public IP to the account's trusted IPs / IP allowlist)", err)
	case CodeInvalidCred, 40013, 40125:
		return fmt.Errorf("%w (check the id and secret in the configuration)", err)
	}
	return err
}
