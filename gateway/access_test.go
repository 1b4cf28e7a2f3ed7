package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
)

// A message the adapter cannot read (an image, a sticker) is answered
// with the adapter's note only once the access rules admit its sender:
// a stranger gets nothing at all, not the note and not the refusal.
func TestAccessBeforeUnsupportedNote(t *testing.T) {
	t.Parallel()
	pol := policy.Config{Platforms: map[string]policy.PlatformPolicy{
		"slack": {Level: config.Level{Access: config.Access{Users: []string{"U-ok"}}, Admins: []string{"U-admin"}}},
	}}
	s := newSkillRig(t, pol, gateway.Config{})
	image := func(id, user string) channels.Message {
		return channels.Message{ID: id, Channel: "slack", Workspace: "W", Chat: "C", User: user, Unsupported: "Sorry, I can only read text."}
	}
	for _, m := range []channels.Message{image("img-1", "U-stranger"), image("img-2", "U-ok"), image("img-3", "U-admin")} {
		if err := s.gw.Submit(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	// One conversation, served in order: by the time the admin's note is
	// out, the stranger's image has been decided.
	got := s.chans["slack"].wait(t, 2)
	for i, want := range []string{"U-ok", "U-admin"} {
		if got[i].msg.User != want || got[i].reply.Text != "Sorry, I can only read text." || !got[i].reply.Notice {
			t.Fatalf("reply %d = %+v; want the note to %s", i, got[i], want)
		}
	}
	// The stranger tries text next: the one refusal of the day, as for
	// anyone refused; the image before it did not use it up or trigger it.
	if r := s.say(t, "slack", "U-stranger", "hello?"); !strings.Contains(r.Text, "not available to you") {
		t.Fatalf("stranger's text got %+v", r)
	}
	if n := len(s.chans["slack"].got); n != 3 {
		t.Fatalf("%d replies; want two notes and one refusal", n)
	}
	if n := s.model.RequestCount(); n != 0 {
		t.Fatalf("the model saw %d requests", n)
	}
	if v := testutil.ToFloat64(s.metrics.MessagesRejected.WithLabelValues("slack", "access")); v != 2 {
		t.Fatalf("rejected{access} = %v, want 2 (the image and the text)", v)
	}
	if v := testutil.ToFloat64(s.metrics.MessagesRejected.WithLabelValues("slack", "unsupported")); v != 2 {
		t.Fatalf("rejected{unsupported} = %v, want 2", v)
	}
	history, err := s.store.History(context.Background(), image("", "").ConversationKey())
	if err != nil || len(history) != 0 {
		t.Fatalf("history holds %d messages (%v); notes and refusals are not turns", len(history), err)
	}
}

// The "still working" note of a full queue goes out before any turn runs,
// so it asks the access rules itself: a stranger flooding a conversation
// hears nothing.
func TestAccessBeforeQueueFullNote(t *testing.T) {
	t.Parallel()
	rg := newRig(t, gateway.Config{QueueLimit: 1, Policy: policy.New(policy.Config{Platforms: map[string]policy.PlatformPolicy{
		"slack": {Level: config.Level{Access: config.Access{Users: []string{"U1"}}}},
	}})})
	conv := msg("t", "", "").ConversationKey()
	rg.redis.Client.Set(context.Background(), rg.redis.Prefix+"conv:{"+conv+"}:lock", "other", 10*time.Second)
	stranger := func(id string) channels.Message { m := msg("t", id, "spam"); m.User = "U-stranger"; return m }
	rg.submit(t, stranger("S1"))
	rg.submit(t, stranger("S2"))
	rg.submit(t, stranger("S3"))
	rg.submit(t, msg("t", "Q1", "am I heard?"))
	got := rg.ch.wait(t, 1)
	if len(got) != 1 || got[0].msg.ID != "Q1" || !strings.Contains(got[0].reply.Text, "still working") {
		t.Fatalf("replies = %+v; want only the allowed user's note", got)
	}
	if v := testutil.ToFloat64(rg.metrics.MessagesRejected.WithLabelValues("slack", "queue_full")); v != 3 {
		t.Fatalf("rejected{queue_full} = %v, want 3 (every refused message still counts)", v)
	}
}

// syncBuffer is a log sink shared by the gateway's workers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) count(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), substr)
}

// A stranger writing to a public bot as fast as they can is counted in
// full but logged once per interval: the log is not theirs to fill.
func TestRefusedMessageLogsAreRateLimited(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Second})
	m := metrics.New()
	logs := &syncBuffer{}
	gw := gateway.New(gateway.Config{Policy: policy.New(policy.Config{Platforms: map[string]policy.PlatformPolicy{
		"slack": {Level: config.Level{Access: config.Access{Users: []string{"U1"}}}},
	}})}, store, nil, m, slog.New(slog.NewTextHandler(logs, nil)))
	ch := newRecorder("slack")
	gw.Register(ch)
	gw.Start()
	t.Cleanup(func() { gw.Shutdown(context.Background()) })
	const n = 300
	// One conversation each, so that they are refused side by side.
	for i := range n {
		stranger := msg(fmt.Sprintf("t%d", i), fmt.Sprintf("S%d", i), "let me in")
		stranger.User = "U-stranger"
		if err := gw.Submit(context.Background(), stranger); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for testutil.ToFloat64(m.MessagesRejected.WithLabelValues("slack", "access")) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%v of %d refusals counted", testutil.ToFloat64(m.MessagesRejected.WithLabelValues("slack", "access")), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Every refusal is counted; the log has a line per 10 s interval the
	// flood lasted, a handful at most however slow this machine is.
	if lines := logs.count("access refused"); lines < 1 || lines > 7 {
		t.Fatalf("%d log lines for %d refused messages", lines, n)
	}
	if got := len(ch.wait(t, n)); got != n {
		t.Fatalf("%d refusals sent; want one per conversation", got)
	}
}
