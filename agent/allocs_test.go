package agent

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// Allocation ceilings of one agent turn: a user message with 20 messages
// of history, one model call, its answer (whole, or streamed in pieces to
// an Events callback). The model is an in-process http.RoundTripper that
// answers every request with the bytes openaitest.Constant or
// ConstantStream serve, so the count is the agent's own work plus
// http.Client's. Over loopback HTTP (as in bench_test.go and wire_test.go)
// the server's and the connection's goroutines allocate in the same
// process and testing.AllocsPerRun counts every goroutine's: the plain
// turn counted 141 there against 67 here, about half of it net/http
// serving, and anything else running in the process (a keep-alive
// connection closing, a leftover server of an earlier test) would land in
// the count too. In process, nothing but the turn runs.
//
// Each is the count measured when it was set plus about 15%. When a change
// moves a count on purpose, run
//
//	go test -run TestTurnAllocations -v ./agent/
//
// with and without -race (the race detector adds a few allocations, and
// the suite runs with it), read the "allocations per turn" lines and set
// the ceiling to the larger count plus 15%, saying here what it was and
// why.
const (
	// Set at 67 measured without -race, up to 68 with it (go1.26.8,
	// linux/amd64): the larger plus 15%.
	maxPlainTurnAllocs = 79
	// Set at 144 measured without -race, up to 146 with it (go1.26.8,
	// linux/amd64): the larger plus 15%.
	maxStreamedTurnAllocs = 168
)

// cannedModel is an OpenAI-compatible endpoint in process: it reads and
// drops each request and answers with the same bytes.
type cannedModel struct {
	body        []byte
	header      http.Header
	requests    int
	contentType string
}

// canned fetches what srv answers to a chat completion request, once, to
// answer with from then on.
func canned(t testing.TB, url string) *cannedModel {
	t.Helper()
	resp, err := http.Post(url+"/chat/completions", "application/json", bytes.NewReader([]byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("fake model: %d %v", resp.StatusCode, err)
	}
	return &cannedModel{body: body, header: http.Header{"Content-Type": {resp.Header.Get("Content-Type")}}}
}

func (m *cannedModel) RoundTrip(req *http.Request) (*http.Response, error) {
	m.requests++
	io.Copy(io.Discard, req.Body)
	req.Body.Close()
	// The header is shared: the client only reads it.
	return &http.Response{
		StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: m.header, Body: io.NopCloser(bytes.NewReader(m.body)), ContentLength: int64(len(m.body)),
		Request: req,
	}, nil
}

// turnCase is one turn to measure.
type turnCase struct {
	name   string
	model  func(testing.TB) *cannedModel
	stream bool
	max    float64
}

var turnCases = []turnCase{
	{"plain", func(t testing.TB) *cannedModel { return canned(t, openaitest.Constant(t, benchAnswer).URL) }, false, maxPlainTurnAllocs},
	{"streamed", func(t testing.TB) *cannedModel {
		return canned(t, openaitest.ConstantStream(t, benchAnswer, len(benchAnswer)/6+1).URL)
	}, true, maxStreamedTurnAllocs},
}

// newTurn is an agent on tc's model and the request of one turn; run runs
// it and fails unless it answered with benchAnswer after one model call.
func newTurn(t testing.TB, tc turnCase) (run func()) {
	t.Helper()
	model := tc.model(t)
	a := New(Config{Model: "bench"}, NewClient("http://model.test/v1", "k", &http.Client{Transport: model}), nil,
		metrics.New(), slog.New(slog.DiscardHandler))
	history := make([]sessions.Message, 0, 20)
	for range 10 {
		history = append(history,
			sessions.Message{Role: "user", Content: "an earlier question of ordinary length"},
			sessions.Message{Role: "assistant", Content: "an earlier answer of ordinary length, a little longer"})
	}
	var pieces int
	req := TurnRequest{Channel: "console", History: stored(t, history...), UserText: "how do I roll back?"}
	if tc.stream {
		req.Events = func(Event) { pieces++ }
	}
	ctx := context.Background()
	return func() {
		before, piecesBefore := model.requests, pieces
		res, err := a.Run(ctx, req)
		if err != nil || res.Failed || res.Reply != benchAnswer || model.requests != before+1 {
			t.Fatalf("Run = %+v, %v after %d model requests; want %q after 1", res, err, model.requests-before, benchAnswer)
		}
		if tc.stream && pieces == piecesBefore {
			t.Fatal("the turn was not streamed")
		}
	}
}

// TestTurnAllocations: the allocations of one turn do not grow past their
// ceilings (issue: allocation counts of the webhook and turn paths that
// fail if they grow). Not parallel: testing.AllocsPerRun refuses to run
// in a parallel test, and counts every goroutine's allocations.
func TestTurnAllocations(t *testing.T) {
	for _, tc := range turnCases {
		t.Run(tc.name, func(t *testing.T) {
			run := newTurn(t, tc)
			for range 10 { // warm up: sync.Pools, lazily built tables
				run()
			}
			allocs := testing.AllocsPerRun(100, run)
			t.Logf("allocations per turn: %.0f (ceiling %.0f)", allocs, tc.max)
			if allocs > tc.max {
				t.Fatalf("a %s turn allocates %.0f times; the ceiling is %.0f (see maxPlainTurnAllocs for how to update it)", tc.name, allocs, tc.max)
			}
		})
	}
}

// BenchmarkInProcessTurn is TestTurnAllocations' turn as a benchmark
// (BenchmarkPlainTurn and BenchmarkStreamedTurn are the same turns over
// loopback HTTP).
func BenchmarkInProcessTurn(b *testing.B) {
	for _, tc := range turnCases {
		b.Run(tc.name, func(b *testing.B) {
			run := newTurn(b, tc)
			b.ReportAllocs()
			for b.Loop() {
				run()
			}
		})
	}
}
