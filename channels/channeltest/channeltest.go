// Package channeltest is the contract every channel adapter passes. An
// adapter's own tests describe it as a Subject, wired to its platform's
// fake, and call Run:
//
//	func TestContract(t *testing.T) {
//		channeltest.Run(t, channeltest.Subject{Name: Name, New: …, Secrets: …})
//	}
//
// Run checks what the rest of Parley relies on without reading the
// adapter's code: the capabilities it declares are the ones it implements
// (every entry of channels.CapabilityTable), and each passes its contract
// check (contracts.go); a send the platform fails is retried, counted
// and, when it keeps failing, reported with an error; Run returns nil once
// its context ends and leaves no goroutine behind; and no credential ever
// appears in an error, a readiness report or a log line.
package channeltest

import (
	"bytes"
	"context"
	"log/slog"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/metrics"
)

// Capability names an optional interface of package channels: a Name of
// channels.CapabilityTable.
type Capability string

// The optional interfaces an adapter may implement (channels.CapabilityTable).
const (
	Runner            Capability = "Runner"
	Typing            Capability = "Typing"
	HTTPChannel       Capability = "HTTPChannel"
	Health            Capability = "Health"
	Poster            Capability = "Poster"
	KeyedPoster       Capability = "KeyedPoster"
	PosterFor         Capability = "PosterFor"
	Streamer          Capability = "Streamer"
	LiveAdopter       Capability = "LiveAdopter"
	Prompter          Capability = "Prompter"
	Awaited           Capability = "Awaited"
	Unanswered        Capability = "Unanswered"
	AttachmentFetcher Capability = "AttachmentFetcher"
	PostCounter       Capability = "PostCounter"
	RoomReader        Capability = "RoomReader"
	Editor            Capability = "Editor"
	Addresser         Capability = "Addresser"
	Uploader          Capability = "Uploader"
)

// Subject is one adapter under the contract, wired to its platform's fake.
type Subject struct {
	// Name is the platform name the adapter reports, and the label its
	// failures are counted under.
	Name string
	// New builds a fresh adapter that counts into m and logs into log.
	// When the adapter is a Runner, Run must reach the fake (connect,
	// poll) so that there is something to stop.
	New func(t *testing.T, m *metrics.Metrics, log *slog.Logger) channels.Channel
	// Capabilities are the optional interfaces the adapter declares; it
	// must implement exactly these.
	Capabilities []Capability
	// Secrets are the credentials New configured. None may appear in an
	// error, a readiness report or a log line.
	Secrets []string

	// Local marks an adapter with no platform behind it (the console):
	// the send checks below do not apply.
	Local bool
	// Message is a message the adapter can answer, as it would have
	// received it.
	Message channels.Message
	// FailSends makes the fake answer the next n send attempts with a
	// transient failure (a 503 or the platform's equivalent).
	FailSends func(n int)
	// SendAttempts is the number of send calls the fake has received.
	SendAttempts func() int
	// Room, required of a RoomReader, writes three messages of other
	// people into a thread of the fake of the adapter built last, then
	// the message asking the bot about it, and returns that message as
	// the adapter would have submitted it.
	Room func(t *testing.T) channels.Message
	// Watch lists import paths of packages, besides the adapter's own and
	// Parley's channels and retry, whose goroutines the adapter starts
	// (an SDK's connection loop); they must end with Run too.
	Watch []string
}

// deadline bounds every wait of the contract; the checks poll, never sleep
// for a fixed time.
const deadline = 20 * time.Second

// Run checks s against the contract, each part as a subtest.
func Run(t *testing.T, s Subject) {
	t.Helper()
	if s.Name == "" || s.New == nil {
		t.Fatal("channeltest: Subject needs Name and New")
	}
	t.Run("capabilities", func(t *testing.T) { checkCapabilities(t, s) })
	if s.Local {
		t.Logf("%s has no platform behind it: no send checks", s.Name)
	} else {
		if s.FailSends == nil || s.SendAttempts == nil {
			t.Fatal("channeltest: an adapter with a platform needs FailSends and SendAttempts")
		}
		t.Run("a failed send is retried and counted", func(t *testing.T) { checkRetriedSend(t, s) })
		t.Run("a send that keeps failing returns an error", func(t *testing.T) { checkFailedSend(t, s) })
	}
	for _, e := range channels.CapabilityTable() {
		c := Capability(e.Name)
		if !slices.Contains(s.Capabilities, c) {
			continue
		}
		check, ok := contracts[c]
		if !ok {
			t.Fatalf("channeltest: channels.%s has no contract check", c)
		}
		t.Run(string(c)+": "+check.what, func(t *testing.T) { check.run(t, s) })
	}
}

// build makes an adapter whose log lines are checked for secrets when the
// subtest ends.
func build(t *testing.T, s Subject) (channels.Channel, *metrics.Metrics) {
	t.Helper()
	m := metrics.New()
	logs := &LogBuffer{}
	ch := s.New(t, m, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { noSecret(t, s, "a log line", logs.String()) })
	return ch, m
}

// noSecret fails when text shows one of s's secrets.
func noSecret(t *testing.T, s Subject, what, text string) {
	t.Helper()
	for _, secret := range s.Secrets {
		if secret != "" && strings.Contains(text, secret) {
			t.Errorf("%s shows a credential:\n%s", what, text)
		}
	}
}

func checkCapabilities(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	if ch.Name() != s.Name {
		t.Errorf("Name() = %q, want %q", ch.Name(), s.Name)
	}
	caps := channels.CapabilitiesOf(ch)
	for _, e := range channels.CapabilityTable() {
		c := Capability(e.Name)
		declared, has := slices.Contains(s.Capabilities, c), caps.Has(e.Name)
		switch {
		case declared && !has:
			t.Errorf("%T declares %s but does not implement channels.%s", ch, c, c)
		case has && !declared:
			t.Errorf("%T implements channels.%s but does not declare it", ch, c)
		}
	}
}

func checkRetriedSend(t *testing.T, s Subject) {
	ch, m := build(t, s)
	before := s.SendAttempts()
	s.FailSends(1)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := ch.Send(ctx, s.Message, channels.Reply{Text: "contract: retried"}); err != nil {
		noSecret(t, s, "the error", err.Error())
		t.Fatalf("Send after one transient failure = %v; want it retried", err)
	}
	if n := s.SendAttempts() - before; n < 2 {
		t.Errorf("the fake saw %d send attempts; want the failed one and its retry", n)
	}
	if n := sum(t, m, "parley_outbound_failures_total", map[string]string{"integration": s.Name, "outcome": "retry"}); n < 1 {
		t.Errorf("parley_outbound_failures_total{integration=%q,outcome=\"retry\"} = %v; want the retry counted", s.Name, n)
	}
	if n := sum(t, m, "parley_channel_api_errors_total", map[string]string{"channel": s.Name}); n < 1 {
		t.Errorf("parley_channel_api_errors_total{channel=%q} = %v; want the failure counted", s.Name, n)
	}
}

func checkFailedSend(t *testing.T, s Subject) {
	ch, m := build(t, s)
	s.FailSends(1000)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	err := ch.Send(ctx, s.Message, channels.Reply{Text: "contract: failing"})
	if err == nil {
		t.Fatal("Send succeeded although every attempt failed")
	}
	noSecret(t, s, "the error", err.Error())
	if ctx.Err() != nil {
		t.Errorf("Send gave up only at the test's deadline: its retries are not bounded")
	}
	if n := sum(t, m, "parley_outbound_failures_total", map[string]string{"integration": s.Name, "outcome": "error"}); n < 1 {
		t.Errorf("parley_outbound_failures_total{integration=%q,outcome=\"error\"} = %v; want the failed call counted", s.Name, n)
	}
	s.FailSends(0)
}

func checkRunStops(t *testing.T, s Subject) {
	before := goroutines()
	ch, _ := build(t, s)
	watch := append([]string{pkgOf(ch), "github.com/parleyhq/parley/channels", "github.com/parleyhq/parley/retry"}, s.Watch...)
	r := channels.CapabilitiesOf(ch).Runner
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, discard{}) }()
	// Let it get going: some goroutine of the adapter is running.
	if !poll(func() bool { return len(started(before, watch)) > 0 }) {
		t.Fatal("Run started nothing")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			noSecret(t, s, "Run's error", err.Error())
			t.Errorf("Run = %v after its context ended; want nil", err)
		}
	case <-time.After(deadline):
		t.Fatalf("Run did not return within %v of its context ending", deadline)
	}
	if !poll(func() bool { return len(started(before, watch)) == 0 }) {
		t.Errorf("goroutines left after Run returned:\n\n%s", strings.Join(started(before, watch), "\n\n"))
	}
	if h := channels.CapabilitiesOf(ch).Health; h != nil {
		if err := h.Ready(); err != nil {
			noSecret(t, s, "Ready()", err.Error())
		}
	}
}

// pkgOf is the import path of the package that defines ch's type.
func pkgOf(ch channels.Channel) string {
	t := reflect.TypeOf(ch)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath()
}

// goroutines returns the stack of every goroutine, by id.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		id, _, _ := strings.Cut(strings.TrimPrefix(header, "goroutine "), " ")
		out[id] = g
	}
	return out
}

// started lists the goroutines that did not exist in before and run code
// of one of the watched packages.
func started(before map[string]string, watch []string) []string {
	var out []string
	for id, stack := range goroutines() {
		if _, old := before[id]; old || strings.Contains(stack, "channeltest.") {
			continue
		}
		for _, pkg := range watch {
			if strings.Contains(stack, "\n"+pkg+".") {
				out = append(out, stack)
				break
			}
		}
	}
	return out
}

// poll reports whether cond became true before the deadline.
func poll(cond func() bool) bool {
	end := time.Now().Add(deadline)
	for {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sum adds the values of every series of the counter name whose labels
// include want.
func sum(t *testing.T, m *metrics.Metrics, name string, want map[string]string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			found := 0
			for _, l := range s.GetLabel() {
				if v, ok := want[l.GetName()]; ok {
					if v != l.GetValue() {
						continue series
					}
					found++
				}
			}
			if found == len(want) {
				total += s.GetCounter().GetValue()
			}
		}
	}
	return total
}

// discard is a gateway that takes every message and does nothing.
type discard struct{}

func (discard) Submit(context.Context, channels.Message) error { return nil }

// LogBuffer collects the log lines of an adapter under test; it is safe
// for the adapter's concurrent writers.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
