package slack

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// Slack's documented example (docs.slack.dev, "Verifying requests from
// Slack").
const (
	vectorSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	vectorTS     = "1531420618"
	vectorBody   = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	vectorSig    = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
)

func TestSignatureVector(t *testing.T) {
	t.Parallel()
	if got := Sign(vectorSecret, vectorTS, []byte(vectorBody)); got != vectorSig {
		t.Fatalf("Sign = %s, want %s", got, vectorSig)
	}
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", vectorTS)
	h.Set("X-Slack-Signature", vectorSig)
	at := time.Unix(1531420618, 0).Add(30 * time.Second)
	if err := Verify(h, []byte(vectorBody), vectorSecret, at); err != nil {
		t.Fatalf("documented vector refused at its own time: %v", err)
	}
	// The same request today is a replay.
	if err := Verify(h, []byte(vectorBody), vectorSecret, time.Now()); !errors.Is(err, ErrStaleTimestamp) {
		t.Fatalf("documented vector today: %v, want ErrStaleTimestamp", err)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"type":"event_callback"}`)
	signed := func(at time.Time, secret string) http.Header {
		h := http.Header{}
		ts := at.Unix()
		h.Set("X-Slack-Request-Timestamp", itoa(ts))
		h.Set("X-Slack-Signature", Sign(secret, itoa(ts), body))
		return h
	}
	tests := []struct {
		name   string
		header http.Header
		body   []byte
		want   error
	}{
		{"valid", signed(now, vectorSecret), body, nil},
		{"4m59s old", signed(now.Add(-299*time.Second), vectorSecret), body, nil},
		{"4m59s ahead", signed(now.Add(299*time.Second), vectorSecret), body, nil},
		{"stale", signed(now.Add(-301*time.Second), vectorSecret), body, ErrStaleTimestamp},
		{"future", signed(now.Add(301*time.Second), vectorSecret), body, ErrStaleTimestamp},
		{"wrong secret", signed(now, "another-secret"), body, ErrBadSignature},
		{"body changed", signed(now, vectorSecret), []byte(`{"type":"event_callback" }`), ErrBadSignature},
		{"no headers", http.Header{}, body, ErrMissingHeaders},
		{"no signature", http.Header{"X-Slack-Request-Timestamp": {itoa(now.Unix())}}, body, ErrMissingHeaders},
		{"bad timestamp", http.Header{"X-Slack-Request-Timestamp": {"soon"}, "X-Slack-Signature": {"v0=00"}}, body, ErrBadTimestamp},
		{"truncated signature", http.Header{"X-Slack-Request-Timestamp": {itoa(now.Unix())}, "X-Slack-Signature": {Sign(vectorSecret, itoa(now.Unix()), body)[:20]}}, body, ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Verify(tt.header, tt.body, vectorSecret, now); !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
