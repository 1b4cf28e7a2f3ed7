package admin_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// from sends a request to r's console as if from addr.
func (r *replica) from(addr, method, path string, form url.Values, header ...string) int {
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req := httptest.NewRequest(method, path, body)
	req.RemoteAddr = addr
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	r.console.ServeHTTP(rec, req)
	return rec.Code
}

// TestSignInThrottleAsksFirst: once an address's failed sign-ins are
// refused (429), the right token from it is refused too until the
// allowance refills: the limiter is asked before the token is compared,
// so guessing on after the 429s learns nothing. Another address still
// signs in.
func TestSignInThrottleAsksFirst(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := w.replica(t, "a", options{})
	const guesser, operator = "198.51.100.7:4000", "203.0.113.9:5000"
	throttled := false
	for range 30 {
		if r.from(guesser, "POST", "/admin/login", url.Values{"token": {"guess"}}) == http.StatusTooManyRequests {
			throttled = true
		}
	}
	if !throttled {
		t.Fatal("30 wrong tokens in a row, none throttled")
	}
	if got := r.from(guesser, "POST", "/admin/login", url.Values{"token": {testToken}}); got != http.StatusTooManyRequests {
		t.Fatalf("the right token from the throttled address: %d, want 429", got)
	}
	if got := r.from(operator, "POST", "/admin/login", url.Values{"token": {testToken}}); got != http.StatusSeeOther {
		t.Fatalf("the right token from another address: %d, want 303 (signed in)", got)
	}
	r.clock.advance(time.Minute)
	if got := r.from(guesser, "POST", "/admin/login", url.Values{"token": {testToken}}); got != http.StatusSeeOther {
		t.Fatalf("the right token once the allowance refilled: %d, want 303", got)
	}
}

// TestBearerGuessesAreThrottled: failed "Authorization: Bearer" attempts
// spend the same allowance as failed sign-ins, and the limiter is asked
// before the token is compared.
func TestBearerGuessesAreThrottled(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := w.replica(t, "a", options{})
	const guesser, operator = "198.51.100.8:4000", "203.0.113.10:5000"
	throttled := false
	for range 30 {
		if r.from(guesser, "GET", "/admin/skills", nil, "Authorization", "Bearer guess") == http.StatusTooManyRequests {
			throttled = true
		}
	}
	if !throttled {
		t.Fatal("30 wrong bearer tokens in a row, none throttled")
	}
	if got := r.from(guesser, "GET", "/admin/skills", nil, "Authorization", "Bearer "+testToken); got != http.StatusTooManyRequests {
		t.Fatalf("the right bearer token from the throttled address: %d, want 429", got)
	}
	if got := r.from(guesser, "POST", "/admin/login", url.Values{"token": {testToken}}); got != http.StatusTooManyRequests {
		t.Fatalf("a sign-in from the address whose bearer guesses were throttled: %d, want 429", got)
	}
	if got := r.from(operator, "GET", "/admin/skills", nil, "Authorization", "Bearer "+testToken); got != http.StatusOK {
		t.Fatalf("the right bearer token from another address: %d, want 200", got)
	}
}
