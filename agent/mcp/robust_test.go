package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// gateSleep replaces the reconnect backoff with a wait the test releases,
// so that what happens while a server is down can be observed without
// racing its restart. Each backoff reported on the returned channel.
func gateSleep(f *fixture) (waiting <-chan time.Duration, release func()) {
	ch := make(chan time.Duration, 16)
	gate := make(chan struct{})
	f.m.timing.sleep = func(ctx context.Context, d time.Duration) bool {
		select {
		case ch <- d:
		default:
		}
		select {
		case <-gate:
			return true
		case <-ctx.Done():
			return false
		}
	}
	return ch, sync1(func() { close(gate) })
}

func sync1(f func()) func() {
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			f()
		}
	}
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// A stdio server killed mid-session: its tools stay registered but are
// neither offered nor run while it is down, it is restarted after the
// backoff, and its tools come back.
func TestKilledStdioServerIsRestarted(t *testing.T) {
	local := stdioConfig("local")
	local.Tools = ToolFilter{Allow: []string{"lookup", "pid"}}
	f := newFixture(t, Config{Servers: map[string]ServerConfig{"local": local}}, Options{})
	waiting, release := gateSleep(f)
	defer release()
	f.start(t)
	ctx := context.Background()
	out, err := f.call(t, ctx, "local__pid", "{}")
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(out)
	killProcess(t, pid)
	receive(t, waiting, "the reconnect backoff")

	st := f.state(t, "local")
	if st.Up || !strings.Contains(st.Err, "killed") || len(st.Tools) != 2 {
		t.Errorf("state while down = %+v, want down (killed) with its two tools kept", st)
	}
	if f.available("local__lookup") {
		t.Error("a tool of a dead server reports itself available")
	}
	md := newModel(t, f)
	md.turnCalling(t, "local__lookup", `{"key":"k"}`, "unavailable right now", "unavailable")
	if offered := offeredTools(md.srv.Requests()[0]); len(offered) != 0 {
		t.Errorf("offered %v while the server is down", offered)
	}

	release()
	waitFor(t, "the restarted server's tools", func() bool { return f.available("local__lookup") })
	if out, err := f.call(t, ctx, "local__lookup", `{"key":"k"}`); err != nil || out != "local has k" {
		t.Errorf("call after restart = %q, %v", out, err)
	}
	out, _ = f.call(t, ctx, "local__pid", "{}")
	if out == strconv.Itoa(pid) {
		t.Error("the same process answers after the restart")
	}
	if st := f.state(t, "local"); !st.Up || st.Connects != 2 {
		t.Errorf("state after restart = %+v, want up after two connects", st)
	}
	var ups []bool
	f.mu.Lock()
	for _, s := range f.states {
		ups = append(ups, s.Up)
	}
	f.mu.Unlock()
	if !slices.Equal(ups, []bool{true, false, true}) {
		t.Errorf("reported states up = %v, want up, down, up", ups)
	}
}

// A tool that never answers is cut off at the server's timeout, the
// server is told (notifications/cancelled), and the next call works; the
// same when the turn itself is abandoned.
func TestHangingToolTimesOutAndIsCancelled(t *testing.T) {
	for _, transport := range []string{TransportStdio, TransportHTTP} {
		t.Run(transport, func(t *testing.T) {
			started, cancelled := make(chan struct{}, 4), make(chan struct{}, 4)
			var cfg ServerConfig
			if transport == TransportHTTP {
				srv, _ := httpServer(t, testServerOptions{
					name:     "s",
					onStart:  func() { started <- struct{}{} },
					onCancel: func() { cancelled <- struct{}{} },
				}, nil)
				cfg = ServerConfig{URL: srv.URL}
			} else {
				dir := t.TempDir()
				startMark, cancelMark := filepath.Join(dir, "started"), filepath.Join(dir, "cancelled")
				cfg = stdioConfig("s", envStartMark, startMark, envCancelMark, cancelMark)
				// The marks are files: turn them into the same signals.
				watch := func(path string, ch chan struct{}) {
					go func() {
						for range 2 {
							for {
								if _, err := os.Stat(path); err == nil {
									os.Remove(path)
									ch <- struct{}{}
									break
								}
								time.Sleep(5 * time.Millisecond)
							}
						}
					}()
				}
				watch(startMark, started)
				watch(cancelMark, cancelled)
			}
			// The same server twice: "s" times out quickly, "patient" never.
			patient := cfg
			cfg.Timeout, patient.Timeout = 300*time.Millisecond, time.Hour
			f := newFixture(t, Config{Servers: map[string]ServerConfig{"s": cfg, "patient": patient}}, Options{})
			f.start(t)
			md := newModel(t, f)

			md.turnCalling(t, "s__hang", "{}", "gave no answer within 300ms", "timeout")
			receive(t, started, "hang to start")
			receive(t, cancelled, "the server to see the timeout's cancellation")

			// The turn is abandoned while the tool runs: the cancellation
			// reaches the server too.
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				<-started
				cancel()
			}()
			md.srv.Script(openaitest.Tools(openaitest.Call("patient__hang", "{}")))
			if _, err := md.agent.Run(ctx, agent.TurnRequest{Channel: "slack", UserText: "hang again"}); !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
			receive(t, cancelled, "the server to see the abandoned turn's cancellation")

			if out, err := f.call(t, context.Background(), "s__lookup", `{"key":"k"}`); err != nil || out != "s has k" {
				t.Errorf("next call = %q, %v", out, err)
			}
		})
	}
}

// A 1 MiB result reaches the model as its first 16 KiB at most, cut on a
// character boundary, with a note saying how much was left out.
func TestLargeResultIsCut(t *testing.T) {
	f := newFixture(t, Config{Servers: map[string]ServerConfig{"local": stdioConfig("local")}}, Options{})
	f.start(t)
	out, err := f.call(t, context.Background(), "local__big", args(map[string]int{"bytes": 1 << 20}))
	if err != nil {
		t.Fatal(err)
	}
	body, note, ok := strings.Cut(out, "\n\n[result cut: ")
	if !ok || len(out) > maxResult || !utf8.ValidString(out) {
		t.Fatalf("result of %d bytes ending %q, want at most %d valid bytes with a note", len(out), out[max(0, len(out)-80):], maxResult)
	}
	if want := strconv.Itoa(1<<20-len(body)) + " of its 1048576 bytes left out]"; note != want {
		t.Errorf("note = %q, want %q", note, want)
	}
	if strings.Trim(body, "é") != "" || len(body) < maxResult-cutNoteRoom-1 {
		t.Errorf("kept %d bytes, want the start of the result, nearly %d bytes", len(body), maxResult)
	}
}

// Each way a server misbehaves leaves the turn answering with a short
// error (or a description) for the model, and the next call working —
// after a restart where the connection could not survive it.
func TestMisbehavingServerLeavesTheTurnAnswering(t *testing.T) {
	tests := []struct {
		name    string
		call    string
		args    string
		want    string // in the tool result the model sees
		outcome string
		restart bool // the connection breaks and the server is restarted
	}{
		{"malformed JSON", "garbage", args(map[string]string{"text": `{"jsonrpc":"2.0","id":1 oops}`}), "MCP server local failed", metrics.OutcomeError, true},
		{"JSON that is not JSON-RPC", "garbage", args(map[string]string{"text": `{"hello":"world"}`}), "MCP server local failed", metrics.OutcomeError, true},
		{"a response to no request", "garbage", args(map[string]string{"text": `{"jsonrpc":"2.0","id":999,"result":{}}`}), "garbage written", metrics.OutcomeOK, false},
		{"stdout flood without a newline", "flood_stdout", args(map[string]int{"bytes": maxFrame + 1<<20}), "MCP server local failed", metrics.OutcomeError, true},
		{"stderr flood", "flood_stderr", args(map[string]int{"bytes": 4 << 20}), "flooded", metrics.OutcomeOK, false},
		{"isError result", "fail", "{}", "error: the tool reported an error: the widget is jammed", metrics.OutcomeError, false},
		{"arguments the server rejects", "lookup", `{"key":7}`, `error: the tool reported an error: validating "arguments"`, metrics.OutcomeError, false},
		{"media content", "media", "{}", "here you are\n[audio: audio/wav, 300.0 KiB — not played, this conversation passes no audio to the model]\n[resource link: report <file:///report.pdf>, application/pdf, 2.0 KiB: the Q3 report — not fetched, so it cannot be sent as a file]\n[resource <file:///notes.txt>, text/plain]\nembedded notes\n[image: image/png, 1.5 KiB — not kept, this conversation sends no files]\n[file: application/octet-stream, 100 bytes — not kept, this conversation sends no files]", metrics.OutcomeOK, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Config{Servers: map[string]ServerConfig{"local": stdioConfig("local")}}, Options{})
			f.start(t)
			md := newModel(t, f)
			if got := md.turnCalling(t, "local__"+tt.call, tt.args, tt.want, tt.outcome); len(got) > maxResult+100 {
				t.Errorf("result of %d bytes", len(got))
			}
			if tt.restart {
				waitFor(t, "the restart", func() bool { return f.state(t, "local").Connects == 2 && f.available("local__lookup") })
			}
			md.turnCalling(t, "local__lookup", `{"key":"k"}`, "local has k", metrics.OutcomeOK)
			if st := f.state(t, "local"); !tt.restart && st.Connects != 1 {
				t.Errorf("connects = %d: the server was restarted", st.Connects)
			}
		})
	}
}

// Every kind of content is described in text or handed over as a file of
// the turn (images, binary resources), never dropped; a link's content is
// not fetched.
func TestMediaContentIsDescribed(t *testing.T) {
	srv, _ := httpServer(t, testServerOptions{name: "remote"}, nil)
	f := newFixture(t, Config{Servers: map[string]ServerConfig{"remote": {URL: srv.URL}}}, Options{})
	f.start(t)
	tool, _ := f.reg.Get("remote__media")
	res, err := tool.Call(context.Background(), &agent.TurnContext{Channel: "slack", Conversation: "c1", User: "U1"}, json.RawMessage("{}"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"here you are",
		"[audio: audio/wav, 300.0 KiB — not played, this conversation passes no audio to the model]",
		"[resource link: report <file:///report.pdf>, application/pdf, 2.0 KiB: the Q3 report — not fetched, so it cannot be sent as a file]",
		"[resource <file:///notes.txt>, text/plain]",
		"embedded notes",
	}, "\n")
	if res.Content != want {
		t.Errorf("result =\n%s\nwant\n%s", res.Content, want)
	}
	if len(res.Files) != 2 || res.Files[0].Type != "image/png" || len(res.Files[0].Data) != 1500 ||
		res.Files[1].Name != "blob.bin" || res.Files[1].Type != "application/octet-stream" || len(res.Files[1].Data) != 100 {
		t.Errorf("files = %+v; want the image and the blob", res.Files)
	}
}

// Tools with schemas the chat API would reject are left out (and listed as
// skipped, with why); the others are offered and the turn works.
func TestInvalidSchemasAreSkipped(t *testing.T) {
	f := newFixture(t, Config{Servers: map[string]ServerConfig{"local": stdioConfig("local", envBadSchemas, "1")}}, Options{})
	f.start(t)
	st := f.state(t, "local")
	var skipped []string
	for _, s := range st.Skipped {
		skipped = append(skipped, s.Original+": "+s.Reason)
	}
	want := []string{
		"bad_array: input schema is not a JSON object",
		"bad_huge: input schema of 32802 bytes is over the 32768-byte limit",
		"bad_string: input schema is not a JSON object",
		"bad_type: input schema has type string, not object",
	}
	if !slices.Equal(skipped, want) {
		t.Errorf("skipped =\n%s\nwant\n%s", strings.Join(skipped, "\n"), strings.Join(want, "\n"))
	}
	untyped, ok := f.reg.Get("local__untyped")
	if !ok {
		t.Fatal("a schema without a type was not offered")
	}
	if got := string(untyped.Parameters()); got != `{"properties":{"q":{"type":"string"}},"type":"object"}` {
		t.Errorf("untyped schema = %s", got)
	}
	md := newModel(t, f)
	md.srv.Script(openaitest.Tools(openaitest.Call("local__untyped", `{}`)), openaitest.Text("fine"))
	res := md.run(t, context.Background(), "slack", "go", nil)
	if got := toolResults(t, res)["local__untyped"]; got != "untyped ran" || res.Reply != "fine" {
		t.Errorf("result %q, reply %q", got, res.Reply)
	}
	for _, tool := range md.srv.Requests()[0].Tools {
		if p, ok := tool.Function.Parameters.(map[string]any); !ok || p["type"] != "object" {
			t.Errorf("tool %s offered with parameters %v", tool.Function.Name, tool.Function.Parameters)
		}
	}
}

// notifications/tools/list_changed adds and removes tools while the
// server stays connected; a removed tool held by a turn is unavailable.
func TestListChangedRefreshesTools(t *testing.T) {
	srv, s := httpServer(t, testServerOptions{name: "remote"}, nil)
	local := stdioConfig("local")
	f := newFixture(t, Config{Servers: map[string]ServerConfig{"remote": {URL: srv.URL}, "local": local}}, Options{})
	f.start(t)
	if _, ok := f.reg.Get("remote__extra"); ok {
		t.Fatal("extra registered before it was added")
	}

	addExtra(s)
	waitFor(t, "remote__extra to appear", func() bool { return f.available("remote__extra") })
	held, _ := f.reg.Get("remote__extra")
	if out, err := f.call(t, context.Background(), "remote__extra", "{}"); err != nil || out != "extra here" {
		t.Errorf("extra = %q, %v", out, err)
	}
	s.RemoveTools("extra")
	waitFor(t, "remote__extra to go", func() bool { _, ok := f.reg.Get("remote__extra"); return !ok })
	if held.(agent.Availability).Available() {
		t.Error("a removed tool reports itself available")
	}

	// Over stdio, a tool call makes the server add the tool.
	if _, err := f.call(t, context.Background(), "local__add_extra", "{}"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "local__extra to appear", func() bool { return f.available("local__extra") })
	for _, st := range f.m.Servers() {
		if st.Connects != 1 {
			t.Errorf("%s connected %d times: a refresh must not reconnect", st.Name, st.Connects)
		}
	}
}

// A server that fails at start-up is down with the reason, does not stop
// the others, and comes up by itself once it can.
func TestServerFailingAtStartupRecovers(t *testing.T) {
	var healthy atomic.Bool
	srv, _ := httpServer(t, testServerOptions{name: "flaky"}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !healthy.Load() {
				http.Error(w, "warming up", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	f := newFixture(t, Config{Servers: map[string]ServerConfig{
		"flaky":   {URL: srv.URL},
		"missing": {Command: filepath.Join(t.TempDir(), "no-such-server")},
		"local":   stdioConfig("local"),
	}}, Options{})
	waiting, release := gateSleep(f)
	defer release()
	f.start(t)
	receive(t, waiting, "a backoff")
	if st := f.state(t, "flaky"); st.Up || !strings.Contains(st.Err, "Service Unavailable") || len(st.Tools) != 0 {
		t.Errorf("flaky = %+v, want down: Service Unavailable", st)
	}
	if st := f.state(t, "missing"); st.Up || !strings.Contains(st.Err, "no such file") {
		t.Errorf("missing = %+v, want down: no such file", st)
	}
	if !f.state(t, "local").Up || !f.available("local__lookup") {
		t.Error("a failing server kept another from starting")
	}
	healthy.Store(true)
	release()
	waitFor(t, "flaky to come up", func() bool { return f.available("flaky__lookup") })
	if st := f.state(t, "flaky"); !st.Up || st.Err != "" {
		t.Errorf("flaky = %+v, want up", st)
	}
}

// A server that stays broken is retried without end but logged at warning
// level once per reason, not at every retry.
func TestBrokenServerIsLoggedOnce(t *testing.T) {
	f := newFixture(t, Config{Servers: map[string]ServerConfig{"missing": {Command: filepath.Join(t.TempDir(), "no-such-server")}}}, Options{})
	f.start(t)
	waitFor(t, "several retries", func() bool { return strings.Count(f.log.String(), "mcp: server down, reconnecting") >= 4 })
	if n := strings.Count(f.log.String(), `level=WARN msg="mcp: server down, reconnecting"`); n != 1 {
		t.Errorf("%d warnings for one reason, want 1", n)
	}
	f.mu.Lock()
	n := len(f.states)
	f.mu.Unlock()
	if n != 1 {
		t.Errorf("%d state changes reported for one failure repeated, want 1", n)
	}
}

// A server without the tools capability (only resources, say) is up with
// no tools, and is not reconnected over and over.
func TestServerWithoutTools(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "docs", Version: "v1"}, nil)
	s.AddResource(&sdk.Resource{URI: "file:///readme", Name: "readme"}, func(context.Context, *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{}, nil
	})
	// The SDK answers tools/list anyway; many servers refuse it.
	s.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method == "tools/list" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}
			}
			return next(ctx, method, req)
		}
	})
	f := newFixture(t, Config{Servers: map[string]ServerConfig{"docs": {URL: httpTestServer(t, streamable(s))}}}, Options{})
	f.start(t)
	if st := f.state(t, "docs"); !st.Up || len(st.Tools) != 0 || st.Connects != 1 {
		t.Errorf("state = %+v, want up with no tools", st)
	}
}

// A streamable HTTP server that restarts forgets its sessions: the call
// that finds out fails with a short error, Parley connects again, and the
// next call works.
func TestHTTPServerRestartIsReconnected(t *testing.T) {
	var current atomic.Pointer[http.Handler]
	restart := func() {
		h := streamable(newTestServer(testServerOptions{name: "remote"}))
		current.Store(&h)
	}
	restart()
	url := httpTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*current.Load()).ServeHTTP(w, r) }))
	f := newFixture(t, Config{Servers: map[string]ServerConfig{"remote": {URL: url}}}, Options{})
	f.start(t)
	ctx := context.Background()
	if out, err := f.call(t, ctx, "remote__lookup", `{"key":"a"}`); err != nil || out != "remote has a" {
		t.Fatalf("first call = %q, %v", out, err)
	}
	restart()
	if _, err := f.call(t, ctx, "remote__lookup", `{"key":"b"}`); err == nil || !strings.HasPrefix(err.Error(), "MCP server remote failed: ") {
		t.Errorf("call after the restart = %v, want a short failure", err)
	}
	waitFor(t, "a working call", func() bool {
		out, err := f.call(t, ctx, "remote__lookup", `{"key":"c"}`)
		return err == nil && out == "remote has c"
	})
	if st := f.state(t, "remote"); !st.Up || st.Connects < 2 {
		t.Errorf("state = %+v, want up after a reconnect", st)
	}
}

// Every attempt after a server's first counts as a reconnect of the mcp
// integration, beside the platforms' reconnects.
func TestServerReconnectsAreCounted(t *testing.T) {
	m := metrics.New()
	f := newFixture(t, Config{Servers: map[string]ServerConfig{"missing": {Command: filepath.Join(t.TempDir(), "no-such-server")}}}, Options{Metrics: m})
	f.start(t)
	waitFor(t, "a reconnect to be counted", func() bool {
		return testutil.ToFloat64(m.Reconnects.WithLabelValues(Integration)) >= 2
	})
}

// TestMetricSeriesFollowTheToolsListed: connecting a server makes no tool
// series (they are made by a tool's first call), and a tool the server
// stops listing takes its series with it, so that a server renaming its
// tools on every reconnect cannot grow /metrics without bound.
func TestMetricSeriesFollowTheToolsListed(t *testing.T) {
	srv, s := httpServer(t, testServerOptions{name: "remote"}, nil)
	m := metrics.New()
	cfg := Config{Servers: map[string]ServerConfig{"remote": {URL: srv.URL}}}
	f := newFixture(t, cfg, Options{Metrics: m})
	f.start(t)
	observe := observeServers(m, cfg)
	for _, st := range f.m.Servers() {
		observe(st) // what the tool source does on every state change
	}
	if n := testutil.CollectAndCount(m.ToolCalls); n != 0 {
		t.Fatalf("%d tool call series once the server connected; want none before a call", n)
	}

	addExtra(s)
	waitFor(t, "remote__extra to appear", func() bool { return f.available("remote__extra") })
	m.ToolCalls.WithLabelValues("slack", "remote__extra", metrics.OutcomeOK).Inc() // the agent counts a call
	m.ToolCallDuration.WithLabelValues("remote__extra").Observe(0.01)
	m.ToolCalls.WithLabelValues("slack", "remote__hang", metrics.OutcomeOK).Inc()
	s.RemoveTools("extra")
	waitFor(t, "remote__extra to go", func() bool { _, ok := f.reg.Get("remote__extra"); return !ok })
	if n := testutil.CollectAndCount(m.ToolCallDuration); n != 0 {
		t.Errorf("%d duration series left after the server dropped its tool", n)
	}
	if n := testutil.CollectAndCount(m.ToolCalls); n != 1 {
		t.Errorf("%d call series left; want only those of the tool still listed", n)
	}
}
