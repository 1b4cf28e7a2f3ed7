package retry

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Reason is why an attempt failed. The set is closed — only the values
// below exist — because it is a label of parley_outbound_failures_total.
// A caller attaches one with Mark; otherwise the loop infers it from the
// error (see ReasonOf).
type Reason struct{ name string }

// The reasons a failed attempt is counted under.
var (
	// RateLimited: 429, a platform's rate-limit code, or any Retry-After.
	RateLimited = Reason{"rate_limited"}
	// ServerError: 5xx or a platform's "internal error" code.
	ServerError = Reason{"server_error"}
	// ClientError: the far end refused the request itself (4xx, a bad
	// token, a missing scope); sending it again will not help.
	ClientError = Reason{"client_error"}
	// Network: no answer at all (dial, reset, DNS, TLS).
	Network = Reason{"network"}
	// Timeout: the attempt's own deadline passed.
	Timeout = Reason{"timeout"}
	// BadResponse: an answer that does not decode or lacks what it must have.
	BadResponse = Reason{"bad_response"}
	// Other: none of the above.
	Other = Reason{"other"}
)

// Reasons lists every Reason, for priming the metric's series.
func Reasons() []Reason {
	return []Reason{RateLimited, ServerError, ClientError, Network, Timeout, BadResponse, Other}
}

// String is the label value.
func (r Reason) String() string {
	if r.name == "" {
		return Other.name
	}
	return r.name
}

// Mark attaches reason to err; errors.Is and errors.As still see err.
func Mark(reason Reason, err error) error {
	if err == nil {
		return nil
	}
	return &markedError{reason: reason, err: err}
}

type markedError struct {
	reason Reason
	err    error
}

func (e *markedError) Error() string { return e.err.Error() }
func (e *markedError) Unwrap() error { return e.err }

// unmark returns err without an outermost Mark: the loop has read the
// reason, and callers get the error they would have got without it.
func unmark(err error) error {
	if m, ok := err.(*markedError); ok {
		return m.err
	}
	return err
}

// ReasonOf is the reason a failed attempt is counted under: the one Mark
// attached, else one read from the error (a deadline is Timeout, a
// net.Error is Network, an undecodable body is BadResponse), else
// RateLimited when the far end asked to wait (after > 0), else Other.
func ReasonOf(err error, after time.Duration) Reason {
	var marked *markedError
	if errors.As(err, &marked) {
		return marked.reason
	}
	var (
		netErr    net.Error
		urlErr    *url.Error
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	case errors.As(err, &netErr) && netErr.Timeout():
		return Timeout
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.As(err, &syntaxErr), errors.As(err, &typeErr):
		return BadResponse
	case errors.As(err, &netErr), errors.As(err, &urlErr):
		return Network
	case after > 0:
		return RateLimited
	}
	return Other
}

// StatusReason names an HTTP status: 429 RateLimited, 408 Timeout, 5xx
// ServerError, other 4xx ClientError.
func StatusReason(code int) Reason {
	switch {
	case code == http.StatusTooManyRequests:
		return RateLimited
	case code == http.StatusRequestTimeout:
		return Timeout
	case code >= 500:
		return ServerError
	case code >= 400:
		return ClientError
	}
	return Other
}

// RetryableStatus reports whether a request that got this HTTP status may
// succeed when sent again: 408, 429 and 5xx.
func RetryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}
