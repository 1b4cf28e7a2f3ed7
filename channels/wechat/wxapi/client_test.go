package wxapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

func testClient(t *testing.T, base string, m *metrics.Metrics) *Client {
	t.Helper()
	r := redistest.New(t)
	return NewClient(Account{
		Channel: "test", ID: "acct", BaseURL: base, Codes: NewCodes(45015),
		TokenOp: "token", TokenPath: "/token", TokenQuery: func() url.Values { return url.Values{"secret": {"the-account-secret"}} },
	}, ClientOptions{RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond}, r.Client, r.Prefix, m, slog.New(slog.DiscardHandler))
}

// The errcode label set is closed: known codes by number, everything
// else "other", transport failures by kind.
func TestCodeLabels(t *testing.T) {
	var mu sync.Mutex
	next := 0 // what the next call is answered
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			w.Write([]byte(`{"access_token":"tok","expires_in":7200}`))
			return
		}
		mu.Lock()
		code := next
		mu.Unlock()
		switch code {
		case 503:
			http.Error(w, "busy", 503)
		case 1:
			w.Write([]byte("not json"))
		default:
			w.Write([]byte(`{"errcode":` + strconv.Itoa(code) + `,"errmsg":"x"}`))
		}
	}))
	defer srv.Close()
	m := metrics.New()
	c := testClient(t, srv.URL, m)
	for _, tt := range []struct {
		code  int
		label string
	}{{45015, "45015"}, {99999, "other"}, {503, "http_5xx"}, {1, "bad_response"}} {
		mu.Lock()
		next = tt.code
		mu.Unlock()
		c.Retrier = c.Retrier.WithAttempts(1)
		if err := c.Call(context.Background(), "op", "/op", map[string]string{}, nil); err == nil {
			t.Fatalf("code %d: no error", tt.code)
		}
		if n := testutil.ToFloat64(m.ChannelAPIErrors.WithLabelValues("test", tt.label)); n != 1 {
			t.Errorf("code %d: label %s counted %v", tt.code, tt.label, n)
		}
	}
}

// A call that got no answer is reported without its URL — whose query
// holds the access token, or the secret when it is the token fetch.
func TestErrorsCarryNoURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	base := srv.URL
	srv.Close() // nothing listens any more
	c := testClient(t, base, metrics.New())
	err := c.Call(context.Background(), "op", "/op", map[string]string{}, nil)
	if err == nil {
		t.Fatal("no error")
	}
	if !errors.Is(err, ErrRefreshFailed) {
		t.Fatalf("err = %v", err)
	}
	for _, leak := range []string{"the-account-secret", "secret=", "access_token", base} {
		if strings.Contains(err.Error(), leak) {
			t.Fatalf("the error shows %q: %v", leak, err)
		}
	}
}

// Every request is a platform call of its op, each try on its own: a
// call answered 503 once and then ok is two calls, and the token fetch
// one of its own.
func TestEachTryIsAPlatformCall(t *testing.T) {
	var mu sync.Mutex
	busy := 1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			w.Write([]byte(`{"access_token":"tok","expires_in":7200}`))
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if busy > 0 {
			busy--
			http.Error(w, "busy", 503)
			return
		}
		w.Write([]byte(`{"errcode":0,"errmsg":"ok"}`))
	}))
	defer srv.Close()
	m := metrics.New()
	c := testClient(t, srv.URL, m)
	if err := c.Call(context.Background(), "message/send", "/op", map[string]string{}, nil); err != nil {
		t.Fatal(err)
	}
	for op, want := range map[string]float64{"message/send": 2, "token": 1} {
		if n := testutil.ToFloat64(m.PlatformCalls.WithLabelValues("test", op)); n != want {
			t.Errorf("parley_platform_calls_total{method=%q} = %v, want %v", op, n, want)
		}
	}
}
