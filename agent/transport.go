package agent

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// maxRetryAfter caps the wait a server may ask for, so that one bad header
// cannot park a conversation for minutes.
const maxRetryAfter = 30 * time.Second

// NewClient returns an OpenAI client for baseURL (empty: the OpenAI API) that
// records Retry-After headers for the Agent's backoff. go-openai's errors do
// not carry response headers, so a wrapping RoundTripper copies the header
// into a slot the Agent puts in each request's context. httpClient may be nil;
// it is copied, never modified.
func NewClient(baseURL, apiKey string, httpClient *http.Client) *openai.Client {
	cfg := openai.DefaultConfig(apiKey)
	if baseURL != "" {
		cfg.BaseURL = strings.TrimRight(baseURL, "/")
	}
	var hc http.Client
	if httpClient != nil {
		hc = *httpClient
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &retryAfterTransport{base: base}
	cfg.HTTPClient = &hc
	return openai.NewClientWithConfig(cfg)
}

// retryAfterTransport copies the Retry-After header of a response into the
// slot found in the request's context, if any.
type retryAfterTransport struct {
	base http.RoundTripper
}

func (t *retryAfterTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if resp != nil {
		if slot, ok := req.Context().Value(retryAfterKey{}).(*retryAfterSlot); ok {
			if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
				slot.set(d)
			}
		}
	}
	return resp, err
}

type retryAfterKey struct{}

// retryAfterSlot receives the wait asked for by the last response of one
// attempt. It is written by the transport and read by the Agent after the
// attempt returns; the mutex keeps the race detector (and HTTP/2 transports
// that finish on another goroutine) honest.
type retryAfterSlot struct {
	mu sync.Mutex
	d  time.Duration
	ok bool
}

func (s *retryAfterSlot) set(d time.Duration) {
	s.mu.Lock()
	s.d, s.ok = d, true
	s.mu.Unlock()
}

func (s *retryAfterSlot) get() (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d, s.ok
}

func withRetryAfterSlot(ctx context.Context) (context.Context, *retryAfterSlot) {
	slot := new(retryAfterSlot)
	return context.WithValue(ctx, retryAfterKey{}, slot), slot
}

// parseRetryAfter reads a Retry-After value, either delay-seconds or an
// HTTP date, capped at maxRetryAfter. A date in the past means "now".
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs < 0 || secs != secs { // negative or NaN
			return 0, false
		}
		if secs > maxRetryAfter.Seconds() {
			return maxRetryAfter, true
		}
		d = time.Duration(secs * float64(time.Second))
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	} else {
		return 0, false
	}
	return min(max(d, 0), maxRetryAfter), true
}
