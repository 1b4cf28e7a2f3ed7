package retry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/metrics"
)

// step is what one scripted attempt returns.
type step struct {
	retry bool
	after time.Duration
	err   error
}

// The failures of the scripts, and what the attempts return: the same
// errors with their reason marked.
var (
	errBusy   = errors.New("http 503")
	errLimit  = errors.New("http 429")
	errRefuse = errors.New("invalid_auth")
	marked    = map[error]error{
		errBusy:   Mark(ServerError, errBusy),
		errLimit:  Mark(RateLimited, errLimit),
		errRefuse: Mark(ClientError, errRefuse),
	}
)

// harness is a Retrier whose waits are recorded instead of slept.
type harness struct {
	r        *Retrier
	m        *metrics.Metrics
	logs     *bytes.Buffer
	mu       sync.Mutex
	waits    []time.Duration
	observed []string
}

func newHarness(p Policy) *harness {
	h := &harness{m: metrics.New(), logs: &bytes.Buffer{}}
	p.Sleep = func(ctx context.Context, d time.Duration) error {
		h.mu.Lock()
		h.waits = append(h.waits, d)
		h.mu.Unlock()
		return ctx.Err()
	}
	p.Observe = func(a Attempted) {
		h.mu.Lock()
		h.observed = append(h.observed, a.Outcome)
		h.mu.Unlock()
	}
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.r = New("test", p, h.m, log)
	return h
}

func (h *harness) script(steps ...step) (Attempt, func() int) {
	var mu sync.Mutex
	n := 0
	return func(context.Context) (bool, time.Duration, error) {
			mu.Lock()
			defer mu.Unlock()
			s := steps[min(n, len(steps)-1)]
			n++
			if m, ok := marked[s.err]; ok {
				return s.retry, s.after, m
			}
			return s.retry, s.after, s.err
		}, func() int {
			mu.Lock()
			defer mu.Unlock()
			return n
		}
}

func (h *harness) failures(reason Reason, outcome string) float64 {
	return testutil.ToFloat64(h.m.OutboundFailures.WithLabelValues("test", reason.String(), outcome))
}

func TestDo(t *testing.T) {
	ok := step{}
	tests := []struct {
		name      string
		policy    Policy
		steps     []step
		wantErr   error // nil: success
		attempts  int
		waits     []time.Duration // exact waits; nil with waitsIn
		waitsIn   [][2]time.Duration
		counted   map[Reason][2]float64 // reason → {retry, error}
		observed  string
		errSubstr string
	}{
		{name: "first try succeeds", policy: Policy{Attempts: 3}, steps: []step{ok}, attempts: 1, observed: "ok"},
		{name: "retried then succeeds", policy: Policy{Attempts: 3, MinWait: 100 * time.Millisecond, MaxWait: time.Second},
			steps: []step{{true, 0, errBusy}, {true, 0, errBusy}, ok}, attempts: 3,
			waitsIn:  [][2]time.Duration{{50 * time.Millisecond, 100 * time.Millisecond}, {100 * time.Millisecond, 200 * time.Millisecond}},
			counted:  map[Reason][2]float64{ServerError: {2, 0}},
			observed: "retry retry ok"},
		{name: "Retry-After is waited exactly", policy: Policy{Attempts: 2},
			steps: []step{{true, 1500 * time.Millisecond, errLimit}, ok}, attempts: 2,
			waits: []time.Duration{1500 * time.Millisecond}, counted: map[Reason][2]float64{RateLimited: {1, 0}}, observed: "retry ok"},
		{name: "not retryable fails at once", policy: Policy{Attempts: 5},
			steps: []step{{false, 0, errRefuse}}, wantErr: errRefuse, attempts: 1,
			counted: map[Reason][2]float64{ClientError: {0, 1}}, observed: "error", errSubstr: "invalid_auth"},
		{name: "attempts run out", policy: Policy{Attempts: 3},
			steps: []step{{true, 0, errBusy}}, wantErr: errBusy, attempts: 3,
			waitsIn: [][2]time.Duration{{DefaultMinWait / 2, DefaultMinWait}, {DefaultMinWait, 2 * DefaultMinWait}},
			counted: map[Reason][2]float64{ServerError: {2, 1}}, observed: "retry retry error", errSubstr: "http 503 (after 3 attempts)"},
		{name: "Retry-After beyond the cap fails at once", policy: Policy{Attempts: 5, MaxRetryAfter: time.Second},
			steps: []step{{true, time.Hour, errLimit}}, wantErr: errLimit, attempts: 1,
			counted: map[Reason][2]float64{RateLimited: {0, 1}}, observed: "error"},
		{name: "zero policy tries once", steps: []step{{true, 0, errBusy}}, wantErr: errBusy, attempts: 1,
			counted: map[Reason][2]float64{ServerError: {0, 1}}, observed: "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(tt.policy)
			attempt, calls := h.script(tt.steps...)
			err := h.r.Do(context.Background(), "op", attempt)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("Do = %v; want success", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("Do = %v; want it to wrap %v", err, tt.wantErr)
			}
			if tt.errSubstr != "" && !strings.Contains(err.Error(), tt.errSubstr) {
				t.Errorf("error %q lacks %q", err, tt.errSubstr)
			}
			if calls() != tt.attempts {
				t.Errorf("attempts = %d, want %d", calls(), tt.attempts)
			}
			if tt.waits != nil && fmt.Sprint(h.waits) != fmt.Sprint(tt.waits) {
				t.Errorf("waits = %v, want %v", h.waits, tt.waits)
			}
			if tt.waitsIn != nil {
				if len(h.waits) != len(tt.waitsIn) {
					t.Fatalf("waits = %v, want %d", h.waits, len(tt.waitsIn))
				}
				for i, w := range h.waits {
					if w < tt.waitsIn[i][0] || w > tt.waitsIn[i][1] {
						t.Errorf("wait %d = %v, want within %v", i, w, tt.waitsIn[i])
					}
				}
			}
			if tt.waits == nil && tt.waitsIn == nil && len(h.waits) != 0 {
				t.Errorf("waits = %v, want none", h.waits)
			}
			for _, r := range Reasons() {
				want := tt.counted[r]
				if got := [2]float64{h.failures(r, "retry"), h.failures(r, "error")}; got != want {
					t.Errorf("failures{reason=%s} retry,error = %v, want %v", r, got, want)
				}
			}
			if got := strings.Join(h.observed, " "); got != tt.observed {
				t.Errorf("observed %q, want %q", got, tt.observed)
			}
		})
	}
}

func TestDoStopsWhenTheContextEnds(t *testing.T) {
	t.Run("during a wait", func(t *testing.T) {
		m := metrics.New()
		r := New("test", Policy{Attempts: 10, MinWait: time.Hour, MaxWait: time.Hour}, m, nil)
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		done := make(chan error, 1)
		go func() {
			done <- r.Do(ctx, "op", func(context.Context) (bool, time.Duration, error) {
				calls++
				cancel() // the caller gives up while the loop waits an hour
				return true, 0, marked[errBusy]
			})
		}()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) || !errors.Is(err, errBusy) {
				t.Fatalf("Do = %v; want context.Canceled and the last failure", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Do waited out its backoff after the context ended")
		}
		if calls != 1 {
			t.Errorf("calls = %d", calls)
		}
	})
	t.Run("during an attempt", func(t *testing.T) {
		h := newHarness(Policy{Attempts: 3})
		ctx, cancel := context.WithCancel(context.Background())
		err := h.r.Do(ctx, "op", func(ctx context.Context) (bool, time.Duration, error) {
			cancel()
			return true, 0, fmt.Errorf("post: %w", ctx.Err())
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Do = %v", err)
		}
		if len(h.waits) != 0 {
			t.Errorf("a cancelled call was retried")
		}
		for _, r := range Reasons() {
			if h.failures(r, "retry")+h.failures(r, "error") != 0 {
				t.Errorf("a call the caller cancelled was counted as a failure (%s)", r)
			}
		}
		if got := strings.Join(h.observed, " "); got != "error" {
			t.Errorf("observed %q", got)
		}
	})
}

// TestDoLogsAFailureWhenItChanges: a long outage is one warning, not one
// per attempt; a new kind of failure is a new warning; the end is logged.
func TestDoLogsAFailureWhenItChanges(t *testing.T) {
	h := newHarness(Policy{Attempts: 6})
	attempt, _ := h.script(step{true, 0, errBusy}, step{true, 0, errBusy}, step{true, 0, errBusy},
		step{true, time.Second, errLimit}, step{true, time.Second, errLimit}, step{false, 0, errRefuse})
	if err := h.r.Do(context.Background(), "chat.postMessage", attempt); !errors.Is(err, errRefuse) {
		t.Fatalf("Do = %v", err)
	}
	var warns []string
	for _, line := range strings.Split(strings.TrimSpace(h.logs.String()), "\n") {
		if strings.Contains(line, "level=WARN") {
			warns = append(warns, line)
		}
		if !strings.Contains(line, "integration=test") || !strings.Contains(line, "op=chat.postMessage") {
			t.Errorf("log line without integration and op: %s", line)
		}
	}
	if len(warns) != 3 || !strings.Contains(warns[0], "reason=server_error") || !strings.Contains(warns[1], "reason=rate_limited") ||
		!strings.Contains(warns[2], "reason=client_error") || !strings.Contains(warns[2], "attempts=6") {
		t.Errorf("warnings:\n%s\nwant one per change of reason and one at the end", strings.Join(warns, "\n"))
	}
}

func TestWithAttempts(t *testing.T) {
	h := newHarness(Policy{Attempts: 5})
	attempt, calls := h.script(step{true, 0, errBusy})
	if err := h.r.WithAttempts(2).Do(context.Background(), "op", attempt); !errors.Is(err, errBusy) {
		t.Fatal(err)
	}
	if calls() != 2 {
		t.Errorf("calls = %d, want 2", calls())
	}
	attempt, calls = h.script(step{true, 0, errBusy})
	h.r.Do(context.Background(), "op", attempt)
	if calls() != 5 {
		t.Errorf("the original Retrier changed: %d calls", calls())
	}
}

func TestReasonOf(t *testing.T) {
	var netErr net.Error = &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	tests := []struct {
		err   error
		after time.Duration
		want  Reason
	}{
		{Mark(ServerError, fmt.Errorf("wrapped: %w", context.DeadlineExceeded)), 0, ServerError},
		{fmt.Errorf("post: %w", context.DeadlineExceeded), 0, Timeout},
		{fmt.Errorf("post: %w", netErr), 0, Network},
		{io.ErrUnexpectedEOF, 0, BadResponse},
		{json.Unmarshal([]byte("{"), new(any)), 0, BadResponse},
		{errors.New("slow down"), time.Second, RateLimited},
		{errors.New("?"), 0, Other},
	}
	for _, tt := range tests {
		if got := ReasonOf(tt.err, tt.after); got != tt.want {
			t.Errorf("ReasonOf(%v, %v) = %s, want %s", tt.err, tt.after, got, tt.want)
		}
	}
	for code, want := range map[int]Reason{429: RateLimited, 408: Timeout, 500: ServerError, 503: ServerError, 401: ClientError, 404: ClientError} {
		if got := StatusReason(code); got != want {
			t.Errorf("StatusReason(%d) = %s, want %s", code, got, want)
		}
	}
	for code, want := range map[int]bool{408: true, 429: true, 500: true, 502: true, 400: false, 401: false, 403: false, 404: false} {
		if RetryableStatus(code) != want {
			t.Errorf("RetryableStatus(%d) != %v", code, want)
		}
	}
	if err := Mark(Network, nil); err != nil {
		t.Errorf("Mark(nil) = %v", err)
	}
}

func TestFailureSeriesArePrimed(t *testing.T) {
	m := metrics.New()
	New("slack", Policy{}, m, nil)
	n := testutil.CollectAndCount(m.OutboundFailures)
	if want := len(Reasons()) * 2; n != want {
		t.Errorf("%d series, want %d (every reason, retry and error)", n, want)
	}
}

// BenchmarkDoSucceeds is a call that succeeds at once, as nearly every
// outbound call does: what Do itself costs it.
func BenchmarkDoSucceeds(b *testing.B) {
	r := New("bench", Policy{}, metrics.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	ok := func(context.Context) (bool, time.Duration, error) { return false, 0, nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Do(ctx, "chat.postMessage", ok); err != nil {
			b.Fatal(err)
		}
	}
}

// TestOnceLeavesTheFailureToItsCaller: a call made Once inside a
// RetryUntil fails twice and then works; the log says "retrying" once (the
// reason did not change) and never "attempts used up", which was untrue
// of a call that was about to be tried again. The failures still count.
func TestOnceLeavesTheFailureToItsCaller(t *testing.T) {
	inner, outer := newHarness(Policy{Attempts: 3}), newHarness(Policy{})
	outer.logs = inner.logs
	outer.r.log = inner.r.log
	attempt, calls := inner.script(step{true, 0, errBusy}, step{true, 0, errBusy}, step{true, 0, nil})
	once := inner.r.Once()
	err := RetryUntil(context.Background(), outer.r, "bot_info", func(ctx context.Context) error {
		return once.Do(ctx, "bot_info", attempt)
	})
	if err != nil || calls() != 3 {
		t.Fatalf("RetryUntil = %v after %d calls; want success on the third", err, calls())
	}
	var warns []string
	for _, line := range strings.Split(strings.TrimSpace(inner.logs.String()), "\n") {
		if strings.Contains(line, "level=WARN") {
			warns = append(warns, line)
		}
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "retrying") {
		t.Errorf("warnings:\n%s\nwant the caller's one \"retrying\"", strings.Join(warns, "\n"))
	}
	if strings.Contains(inner.logs.String(), "level=WARN msg=\"outbound call failed\" ") {
		t.Errorf("the call made once warned of its own failure:\n%s", inner.logs.String())
	}
	if got := inner.failures(ServerError, "error"); got != 2 {
		t.Errorf("the call's failures counted %v times, want 2", got)
	}
	if h := newHarness(Policy{Attempts: 5}); h.r.Once().policy.Attempts != 1 || h.r.quiet {
		t.Error("Once changed the Retrier it was made from, or tries more than once")
	}
}
