package slack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// MaxClockSkew is how far a request's timestamp may be from now, either
// way, before the request is refused as a replay.
const MaxClockSkew = 5 * time.Minute

// Verification errors. None of them carries the secret or the signature.
var (
	ErrMissingHeaders = errors.New("slack: request is not signed (X-Slack-Signature or X-Slack-Request-Timestamp missing)")
	ErrBadTimestamp   = errors.New("slack: X-Slack-Request-Timestamp is not a unix time")
	ErrStaleTimestamp = errors.New("slack: request timestamp is more than 5 minutes from now")
	ErrBadSignature   = errors.New("slack: request signature does not match")
)

// Sign returns the v0 signature of body sent at timestamp (unix seconds):
// "v0=" + hex(HMAC-SHA256(secret, "v0:{timestamp}:{body}")).
func Sign(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + timestamp + ":"))
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify checks a request's Slack signature over its raw body at the time
// now. It compares in constant time and refuses a timestamp more than
// MaxClockSkew in the past or the future.
func Verify(h http.Header, body []byte, secret string, now time.Time) error {
	sig := h.Get("X-Slack-Signature")
	ts := h.Get("X-Slack-Request-Timestamp")
	if sig == "" || ts == "" || secret == "" {
		return ErrMissingHeaders
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrBadTimestamp
	}
	if d := now.Sub(time.Unix(sec, 0)); d > MaxClockSkew || d < -MaxClockSkew {
		return ErrStaleTimestamp
	}
	if !hmac.Equal([]byte(sig), []byte(Sign(secret, ts, body))) {
		return ErrBadSignature
	}
	return nil
}

// rejectReason is the metric reason for a verification error.
func rejectReason(err error) string {
	switch {
	case errors.Is(err, ErrMissingHeaders):
		return "missing_headers"
	case errors.Is(err, ErrBadTimestamp):
		return "bad_timestamp"
	case errors.Is(err, ErrStaleTimestamp):
		return "stale_timestamp"
	default:
		return "bad_signature"
	}
}
