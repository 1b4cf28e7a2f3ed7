package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// recorder is a channel that keeps every reply.
type recorder struct {
	name string
	mu   sync.Mutex
	got  []sent
	cond *sync.Cond
}

type sent struct {
	msg   channels.Message
	reply channels.Reply
}

func newRecorder(name string) *recorder {
	r := &recorder{name: name}
	r.cond = sync.NewCond(&r.mu)
	return r
}

func (r *recorder) Name() string { return r.name }

func (r *recorder) Send(_ context.Context, m channels.Message, rep channels.Reply) error {
	r.mu.Lock()
	r.got = append(r.got, sent{m, rep})
	r.cond.Broadcast()
	r.mu.Unlock()
	return nil
}

// wait blocks until n replies arrived or the deadline passes.
func (r *recorder) wait(t *testing.T, n int) []sent {
	t.Helper()
	deadline := time.AfterFunc(30*time.Second, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer deadline.Stop()
	start := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.got) < n {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("got %d replies, want %d", len(r.got), n)
		}
		r.cond.Wait()
	}
	return append([]sent(nil), r.got...)
}

type rig struct {
	gw      *gateway.Gateway
	store   *sessions.RedisStore
	model   *openaitest.Server
	ch      *recorder
	metrics *metrics.Metrics
	redis   *redistest.Redis
	logs    *syncBuffer // the gateway's warnings and errors
}

// submit hands m to the gateway, which must accept it: a refusal is a
// reply, never an error.
func (rg *rig) submit(t *testing.T, m channels.Message) {
	t.Helper()
	if err := rg.gw.Submit(context.Background(), m); err != nil {
		t.Fatalf("Submit(%q) = %v", m.Text, err)
	}
}

func newRig(t *testing.T, cfg gateway.Config, opts ...openaitest.Option) *rig {
	t.Helper()
	r := redistest.New(t)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Second, MaxMessages: 1000})
	model := openaitest.New(t, opts...)
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := agent.New(agent.Config{Model: "test", Timeout: 5 * time.Second, MaxRetries: 1, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond},
		agent.NewClient(model.URL(), "sk-test", nil), agent.NewRegistry(), m, log)
	logs := &syncBuffer{}
	gw := gateway.New(cfg, store, a, m, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ch := newRecorder("slack")
	gw.Register(ch)
	gw.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := gw.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return &rig{gw: gw, store: store, model: model, ch: ch, metrics: m, redis: r, logs: logs}
}

func msg(thread, id, text string) channels.Message {
	return channels.Message{ID: id, Channel: "slack", Workspace: "T1", Chat: "C1", Thread: thread, User: "U1", Text: text}
}

func TestConcurrentMessagesOfOneConversationStayOrdered(t *testing.T) {
	t.Parallel()
	rg := newRig(t, gateway.Config{Workers: 8, QueueLimit: 100})
	ctx := context.Background()
	const n = 50
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rg.gw.Submit(ctx, msg("t1", fmt.Sprintf("a%d", i), fmt.Sprintf("a-%d", i))); err != nil {
				t.Error(err)
			}
			// a second conversation runs alongside
			if err := rg.gw.Submit(ctx, msg("t2", fmt.Sprintf("b%d", i), fmt.Sprintf("b-%d", i))); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	replies := rg.ch.wait(t, 2*n)
	for _, thread := range []string{"t1", "t2"} {
		h, err := rg.store.History(ctx, msg(thread, "", "").ConversationKey())
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 2*n {
			t.Fatalf("%s: history has %d messages, want %d", thread, len(h), 2*n)
		}
		seen := map[string]bool{}
		var order []string
		for i := 0; i < len(h); i += 2 {
			u, a := h[i], h[i+1]
			if u.Role != "user" || a.Role != "assistant" || a.Content != "echo: "+u.Content {
				t.Fatalf("%s: turn %d interleaved: %+v / %+v", thread, i/2, u, a)
			}
			if seen[u.Content] {
				t.Fatalf("%s: %q answered twice", thread, u.Content)
			}
			seen[u.Content] = true
			order = append(order, u.Content)
		}
		// The replies of the thread went out in the same order the history holds.
		var replyOrder []string
		for _, r := range replies {
			if r.msg.Thread == thread {
				replyOrder = append(replyOrder, strings.TrimPrefix(r.reply.Text, "echo: "))
			}
		}
		if fmt.Sprint(replyOrder) != fmt.Sprint(order) {
			t.Fatalf("%s: replies %v\nhistory %v", thread, replyOrder, order)
		}
	}
}

func TestDuplicateEventProcessedOnce(t *testing.T) {
	t.Parallel()
	rg := newRig(t, gateway.Config{Workers: 2})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if err := rg.gw.Submit(ctx, msg("t", "Ev1", "hello")); err != nil {
			t.Fatal(err)
		}
	}
	rg.submit(t, msg("t", "Ev2", "marker"))
	rg.ch.wait(t, 2)
	if got := rg.model.RequestCount(); got != 2 {
		t.Fatalf("model saw %d requests; want 2 (Ev1 once, Ev2 once)", got)
	}
	if got := testutil.ToFloat64(rg.metrics.MessagesDeduplicated.WithLabelValues("slack")); got != 2 {
		t.Fatalf("deduplicated = %v; want 2", got)
	}
}

func TestResetClearsTheConversation(t *testing.T) {
	t.Parallel()
	rg := newRig(t, gateway.Config{})
	rg.submit(t, msg("t", "", "remember 42"))
	rg.submit(t, msg("t", "", "/reset"))
	rg.submit(t, msg("t", "", "what number?"))
	got := rg.ch.wait(t, 3)
	if !got[1].reply.Notice || !strings.Contains(got[1].reply.Text, "cleared") {
		t.Fatalf("reset reply = %+v", got[1].reply)
	}
	reqs := rg.model.Requests()
	last := reqs[len(reqs)-1]
	for _, m := range last.Messages {
		if strings.Contains(m.Content, "42") {
			t.Fatalf("the model still saw the conversation before /reset: %+v", last.Messages)
		}
	}
}

func TestOversizedMessageIsRefusedWithoutAModelCall(t *testing.T) {
	t.Parallel()
	rg := newRig(t, gateway.Config{MaxMessageChars: 10})
	rg.submit(t, msg("t", "", "这条消息有十一个字符长啊"))
	got := rg.ch.wait(t, 1)
	if !strings.Contains(got[0].reply.Text, "too long") {
		t.Fatalf("reply = %q", got[0].reply.Text)
	}
	if n := rg.model.RequestCount(); n != 0 {
		t.Fatalf("model saw %d requests; want 0", n)
	}
	if v := testutil.ToFloat64(rg.metrics.MessagesRejected.WithLabelValues("slack", "message_too_long")); v != 1 {
		t.Fatalf("rejected{message_too_long} = %v", v)
	}
}

func TestModelFailureKeepsTheUserMessage(t *testing.T) {
	t.Parallel()
	rg := newRig(t, gateway.Config{})
	rg.model.Script(openaitest.Error(500), openaitest.Error(500))
	rg.submit(t, msg("t", "", "are you there?"))
	got := rg.ch.wait(t, 1)
	if !strings.Contains(strings.ToLower(got[0].reply.Text), "sorry") {
		t.Fatalf("reply = %q; want an apology", got[0].reply.Text)
	}
	h, _ := rg.store.History(context.Background(), msg("t", "", "").ConversationKey())
	if len(h) != 1 || h[0].Role != "user" || h[0].Content != "are you there?" {
		t.Fatalf("history = %+v; want just the user's message", h)
	}
}

func TestDeadReplicasLockExpiresAndTheQueueIsServed(t *testing.T) {
	t.Parallel()
	rg := newRig(t, gateway.Config{})
	ctx := context.Background()
	conv := msg("t", "", "").ConversationKey()
	// Another replica took the lock and died without releasing it.
	rg.redis.Client.Set(ctx, rg.redis.Prefix+"conv:{"+conv+"}:lock", "dead-replica", time.Second)
	rg.submit(t, msg("t", "", "anyone?"))
	got := rg.ch.wait(t, 1)
	if got[0].reply.Text != "echo: anyone?" {
		t.Fatalf("reply = %q", got[0].reply.Text)
	}
}

func TestShutdownDrainsRunningTurns(t *testing.T) {
	t.Parallel()
	rg := newRig(t, gateway.Config{})
	rg.model.Script(openaitest.Text("slow answer").WithDelay(500 * time.Millisecond))
	rg.submit(t, msg("t", "", "take your time"))
	// Wait until the model has the request, then shut down.
	for deadline := time.Now().Add(10 * time.Second); rg.model.RequestCount() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the turn never reached the model")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rg.gw.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	got := rg.ch.wait(t, 1)
	if got[0].reply.Text != "slow answer" {
		t.Fatalf("reply = %q", got[0].reply.Text)
	}
	if err := rg.gw.Submit(context.Background(), msg("t", "", "late")); !errors.Is(err, gateway.ErrClosed) {
		t.Fatalf("Submit after Shutdown = %v; want ErrClosed", err)
	}
}

// errQueueDown is the failure of failingAccept.
var errQueueDown = errors.New("redis: connection refused")

// failingAccept is a store whose queue is down.
type failingAccept struct{ sessions.Store }

func (f failingAccept) Accept(context.Context, string, sessions.Arrival) (sessions.Acceptance, error) {
	return 0, errQueueDown
}

func TestAMessageNotQueuedIsTakenWhenRedelivered(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	broken := gateway.New(gateway.Config{}, failingAccept{store}, nil, nil, log)
	if err := broken.Submit(context.Background(), msg("t", "Ev9", "hi")); !errors.Is(err, errQueueDown) {
		t.Fatalf("Submit = %v although the queue is down; want its error", err)
	}
	// The platform re-delivers to a healthy replica: it must not be a duplicate.
	got, err := store.Accept(context.Background(), msg("t", "", "").ConversationKey(), sessions.Arrival{Item: []byte("hi"), ID: "Ev9", Limit: 10})
	if err != nil || got != sessions.Queued {
		t.Fatalf("Accept after a failed Submit = %v, %v; want a fresh message", got, err)
	}
}

func TestAFullQueueIsRefusedPolitely(t *testing.T) {
	t.Parallel()
	rg := newRig(t, gateway.Config{QueueLimit: 1})
	conv := msg("t", "", "").ConversationKey()
	// Hold the conversation as another replica would, so nothing drains.
	rg.redis.Client.Set(context.Background(), rg.redis.Prefix+"conv:{"+conv+"}:lock", "other", 10*time.Second)
	rg.submit(t, msg("t", "Q1", "first"))
	rg.submit(t, msg("t", "Q2", "second"))
	got := rg.ch.wait(t, 1)
	if !got[0].reply.Notice || !strings.Contains(got[0].reply.Text, "still working") || got[0].msg.ID != "Q2" {
		t.Fatalf("reply = %+v", got[0])
	}
	if v := testutil.ToFloat64(rg.metrics.MessagesRejected.WithLabelValues("slack", "queue_full")); v != 1 {
		t.Fatalf("rejected{queue_full} = %v", v)
	}
}

func TestSweepServesAConversationLeftQueuedByADeadReplica(t *testing.T) {
	t.Parallel()
	rg := newRig(t, gateway.Config{SweepEvery: 100 * time.Millisecond})
	// A replica accepted this message and died before serving it: it is
	// queued, no lock is held, and no new message will come.
	m := msg("orphan", "", "anyone there?")
	m.Received = time.Now()
	item, _ := json.Marshal(map[string]any{"msg": m, "nonce": "n1"})
	if _, err := rg.store.Accept(context.Background(), m.ConversationKey(), sessions.Arrival{Item: item, Limit: 10}); err != nil {
		t.Fatal(err)
	}
	got := rg.ch.wait(t, 1)
	if got[0].reply.Text != "echo: anyone there?" {
		t.Fatalf("reply = %q", got[0].reply.Text)
	}
	if orphans, err := rg.store.Orphans(context.Background()); err != nil || len(orphans) != 0 {
		t.Fatalf("orphans after the sweep = %v, %v", orphans, err)
	}
}
