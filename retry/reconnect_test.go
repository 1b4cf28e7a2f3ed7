package retry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/metrics"
)

// script is a sequence of session results; the session after the last
// one cancels the run.
type sessionResult struct {
	healthy bool
	err     error
}

func runScript(t *testing.T, results ...sessionResult) (waits []time.Duration, m *metrics.Metrics, logs string) {
	t.Helper()
	m = metrics.New()
	var buf bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	r := Reconnect{
		Integration: "test", What: "long connection",
		Backoff: Backoff{Min: 100 * time.Millisecond, Max: 800 * time.Millisecond},
		Metrics: m, Log: slog.New(slog.NewTextHandler(&buf, nil)),
		Sleep: func(ctx context.Context, d time.Duration) bool {
			mu.Lock()
			waits = append(waits, d)
			mu.Unlock()
			return ctx.Err() == nil
		},
	}
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, func(ctx context.Context) (bool, error) {
			if n == len(results) {
				cancel()
				<-ctx.Done()
				return false, ctx.Err()
			}
			n++
			return results[n-1].healthy, results[n-1].err
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if n != len(results) {
		t.Fatalf("%d sessions ran, want %d", n, len(results))
	}
	return waits, m, buf.String()
}

func TestReconnectWaitsLongerAndStartsOverAfterAHealthySession(t *testing.T) {
	lost := errors.New("read: connection reset")
	waits, m, _ := runScript(t,
		sessionResult{false, lost}, sessionResult{false, lost}, sessionResult{false, lost}, sessionResult{false, lost},
		sessionResult{true, lost}, sessionResult{false, lost})
	ceilings := []time.Duration{100, 200, 400, 800, 100, 200} // ms; the fifth session was healthy
	if len(waits) != len(ceilings) {
		t.Fatalf("waits %v", waits)
	}
	for i, w := range waits {
		c := ceilings[i] * time.Millisecond
		if w < c/2 || w > c {
			t.Errorf("wait %d = %v, want within [%v, %v]", i, w, c/2, c)
		}
	}
	if got := testutil.ToFloat64(m.Reconnects.WithLabelValues("test")); got != 6 {
		t.Errorf("reconnects = %v, want 6 (every session after the first)", got)
	}
}

func TestReconnectLogsHowAConnectionEnded(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		level    string
		minWait  time.Duration
		contains string
	}{
		{"lost", errors.New("read: EOF"), "level=WARN", 50 * time.Millisecond, "long connection lost; reconnecting"},
		{"refused", fmt.Errorf("%w (check the app secret): code 1000040343", ErrRefused), "level=ERROR", 50 * time.Millisecond, "check the app secret"},
		{"replaced", fmt.Errorf("subscription: %w", ErrReplaced), "level=ERROR", 400 * time.Millisecond, "taken over by another client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			waits, _, logs := runScript(t, sessionResult{false, tt.err})
			if !strings.Contains(logs, tt.level) || !strings.Contains(logs, tt.contains) {
				t.Errorf("log %q; want %s with %q", logs, tt.level, tt.contains)
			}
			if len(waits) != 1 || waits[0] < tt.minWait {
				t.Errorf("waits %v; want one of at least %v", waits, tt.minWait)
			}
		})
	}
}

func TestRetryUntil(t *testing.T) {
	m := metrics.New()
	r := New("test", Policy{MinWait: time.Millisecond, MaxWait: 2 * time.Millisecond}, m, nil)
	calls := 0
	err := RetryUntil(context.Background(), r, "auth.test", func(context.Context) error {
		calls++
		if calls < 4 {
			return Mark(Network, errors.New("dial: refused"))
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Fatalf("RetryUntil = %v after %d calls; want success on the fourth", err, calls)
	}
	if got := testutil.ToFloat64(m.OutboundFailures.WithLabelValues("test", "network", "retry")); got != 3 {
		t.Errorf("counted %v failures, want 3", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = RetryUntil(ctx, r, "auth.test", func(context.Context) error {
		calls++
		if calls == 3 {
			cancel()
		}
		return errors.New("still failing")
	})
	if !errors.Is(err, context.Canceled) || calls != 3 {
		t.Fatalf("RetryUntil = %v after %d calls; want context.Canceled after 3", err, calls)
	}
}

// TestReconnectLogsAFailureWhenItChanges: an outage that fails the same
// way at every try is one line, not one per reconnect; a new failure is a
// new line, and so is the first failure after a healthy session.
func TestReconnectLogsAFailureWhenItChanges(t *testing.T) {
	reset := errors.New("read: connection reset")
	refused := fmt.Errorf("%w (check the token): 401", ErrRefused)
	_, _, logs := runScript(t,
		sessionResult{false, reset}, sessionResult{false, reset}, sessionResult{false, reset},
		sessionResult{false, refused}, sessionResult{false, refused},
		sessionResult{false, reset},
		sessionResult{true, reset}, sessionResult{false, reset})
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		level, _, _ := strings.Cut(strings.TrimPrefix(line[strings.Index(line, "level="):], "level="), " ")
		lines = append(lines, level)
	}
	// Reset three times: one warning; refused twice: one error; reset
	// again: a change; after the healthy session, reset is news again;
	// the last repeats it.
	if got, want := strings.Join(lines, " "), "WARN ERROR WARN WARN"; got != want {
		t.Errorf("logged %s, want %s:\n%s", got, want, logs)
	}
}
