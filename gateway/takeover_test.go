package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sashabaranov/go-openai"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/channels/slack"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// takeoverAnswer is the 40-word answer of issue 28's measurement.
const takeoverAnswer = "Roll back the deploy first, then watch the error rate on the dashboard for ten minutes. " +
	"If it stays under one percent, tell the channel that the incident is over, write a short note " +
	"for the postmortem, and open a ticket to fix the failing migration before Friday."

// takeoverLockTTL is the replicas' lock TTL: short, so that the dead
// replica's lock expires soon.
const takeoverLockTTL = 300 * time.Millisecond

// takeoverReplica is one gateway of a two-replica bot, on a Redis client
// of its own, so that the test can cut it off as a kill would.
type takeoverReplica struct {
	gw     *gateway.Gateway
	store  *sessions.RedisStore
	client *redis.Client
}

// newTakeoverReplica starts a replica that answers with the model at
// modelURL, through the adapter newChannel makes on its Redis client.
func newTakeoverReplica(t *testing.T, r *redistest.Redis, modelURL string,
	newChannel func(redis.UniversalClient, *metrics.Metrics, *slog.Logger) (channels.Channel, error)) *takeoverReplica {
	t.Helper()
	opts, err := redis.ParseURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opts)
	t.Cleanup(func() { client.Close() })
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := sessions.NewRedis(client, sessions.Options{Prefix: r.Prefix, LockTTL: takeoverLockTTL, MaxMessages: 1000})
	a := agent.New(agent.Config{Model: "test", Timeout: time.Minute, MaxRetries: 1, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond},
		agent.NewClient(modelURL, "sk-test", nil), agent.NewRegistry(), m, log)
	gw := gateway.New(gateway.Config{SweepEvery: 20 * time.Millisecond}, store, a, m, log)
	ch, err := newChannel(client, m, log)
	if err != nil {
		t.Fatal(err)
	}
	gw.Register(ch)
	gw.Start()
	rp := &takeoverReplica{gw: gw, store: store, client: client}
	t.Cleanup(func() { rp.kill() })
	return rp
}

// kill stops the replica as abruptly as a test can: its Redis goes away
// first (its lock then expires unrenewed), and only then are its turns
// cancelled; whatever cleanup they attempt comes after another replica
// has taken their conversations over, as a zombie's would.
func (rp *takeoverReplica) cutOff() { rp.client.Close() }

func (rp *takeoverReplica) kill() {
	rp.cutOff()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace: running turns are cancelled at once
	_ = rp.gw.Shutdown(ctx)
}

// stallingModel streams the first words of answer, then stops sending
// without ending the stream, as a model whose process was killed would
// leave it; it answers nothing else. started counts its requests.
func stallingModel(t *testing.T, answer string, words int, started *atomic.Int32) string {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta string) {
			_, _ = io.WriteString(w, `data: {"id":"stall","object":"chat.completion.chunk","created":1,"model":"test","choices":[{"index":0,"delta":`+delta+`,"finish_reason":null}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		chunk(`{"role":"assistant","content":""}`)
		for _, word := range strings.SplitAfter(answer, " ")[:words] {
			content, _ := json.Marshal(word)
			chunk(`{"content":` + string(content) + `}`)
		}
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // runs first: a stalled handler lets Close return
	return srv.URL + "/v1"
}

// liveKey is the Redis key recording the live reply of m's conversation.
func liveKey(r *redistest.Redis, m channels.Message) string {
	return r.Prefix + "conv:{" + m.ConversationKey() + "}:live"
}

// takeOver runs the test's middle: A answers m until the first words are
// visible (shown reports it) and recorded; A is cut off; B, answering
// with the whole answer, takes the conversation over once A's lock has
// expired; done reports that B's answer has settled. It returns B.
func takeOver(t *testing.T, r *redistest.Redis, m channels.Message, shown, done func() bool,
	newChannel func(redis.UniversalClient, *metrics.Metrics, *slog.Logger) (channels.Channel, error)) (a, b *takeoverReplica, full *openaitest.Server) {
	t.Helper()
	var stalled atomic.Int32
	a = newTakeoverReplica(t, r, stallingModel(t, takeoverAnswer, 6, &stalled), newChannel)
	if err := a.gw.Submit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	slacktest.WaitFor(t, "the first words shown and recorded", 30*time.Second, func() bool {
		return shown() && r.Client.Exists(context.Background(), liveKey(r, m)).Val() == 1
	})
	a.cutOff()
	full = openaitest.New(t, openaitest.WithResponder(func(openai.ChatCompletionRequest) openaitest.Step {
		return openaitest.Text(takeoverAnswer)
	}))
	b = newTakeoverReplica(t, r, full.URL(), newChannel)
	slacktest.WaitFor(t, "the other replica's answer", 30*time.Second, done)
	if n := stalled.Load(); n != 1 {
		t.Errorf("the killed replica's model was asked %d times; want 1", n)
	}
	if n := full.RequestCount(); n != 1 {
		t.Errorf("the other replica's model was asked %d times; want 1", n)
	}
	h, err := b.store.History(context.Background(), m.ConversationKey())
	if err != nil || len(h) != 2 || h[1].Content != takeoverAnswer {
		t.Fatalf("history %+v, %v; want the one turn, answered in full", h, err)
	}
	if n := r.Client.Exists(context.Background(), liveKey(r, m)).Val(); n != 0 {
		t.Error("the live reply is still recorded after its turn was written")
	}
	return a, b, full
}

// TestAReplicaKilledMidStreamLeavesOneAnswer (issue 28, item 10): the
// answer streams into a Slack thread and its replica is killed after the
// first words; the other replica answers after the lock expires, by
// finishing the half answer: the thread ends with exactly one message,
// the whole answer — and it stays so when the killed replica's turn is
// finally cancelled and tries to clean up.
func TestAReplicaKilledMidStreamLeavesOneAnswer(t *testing.T) {
	t.Parallel()
	r, fake := redistest.New(t), slacktest.New(t)
	newSlack := func(_ redis.UniversalClient, m *metrics.Metrics, log *slog.Logger) (channels.Channel, error) {
		return slack.New(slack.Config{BotToken: slacktest.BotToken, APIURL: fake.APIURL()},
			slack.Options{RetryWait: 5 * time.Millisecond, UpdateEvery: 5 * time.Millisecond, AppendEvery: time.Millisecond}, m, log)
	}
	const thread = "1700000000.000100"
	m := channels.Message{ID: "Ev1", Channel: slack.Name, Workspace: slacktest.TeamID, Chat: "C1", Thread: thread,
		User: "U1", Text: "what now?", Received: time.Now(), Meta: map[string]string{slack.MetaThreadTS: thread}}
	shown := func() bool {
		vis := fake.Visible()
		return len(vis) == 1 && vis[0].Streaming && vis[0].Text != "" && strings.HasPrefix(takeoverAnswer, vis[0].Text)
	}
	answered := func() bool {
		vis := fake.Visible()
		return len(vis) == 1 && vis[0].Text == takeoverAnswer && !vis[0].Streaming
	}
	a, _, _ := takeOver(t, r, m, shown, answered, newSlack)
	a.kill() // the zombie's turn ends now; its lock has long been another's
	vis := fake.Visible()
	if len(vis) != 1 || vis[0].Text != takeoverAnswer || vis[0].ThreadTS != thread || !vis[0].Streamed {
		t.Fatalf("thread shows %+v; want the half answer finished in place, alone", vis)
	}
	if n := len(fake.Messages()); n != 1 {
		t.Errorf("%d messages were made; want the one finished", n)
	}
	if n := fake.Count("chat.postMessage"); n != 0 {
		t.Errorf("%d posts; want the answer edited in place", n)
	}
}

// TestAReplicaKilledMidCardLeavesOneAnswer: the Feishu variant. The
// answer is written into a CardKit card and its replica killed after the
// first words; the other replica updates the same card to the whole
// answer and closes its streaming: one card, complete.
func TestAReplicaKilledMidCardLeavesOneAnswer(t *testing.T) {
	t.Parallel()
	r, fake := redistest.New(t), feishutest.New(t)
	newFeishu := func(client redis.UniversalClient, m *metrics.Metrics, log *slog.Logger) (channels.Channel, error) {
		return feishu.New(feishu.Config{AppID: "cli_" + strings.NewReplacer("/", "_").Replace(t.Name()), AppSecret: "secret",
			VerificationToken: "vtoken", BaseURL: fake.URL, Mode: feishu.ModeWebhook, ReplyInThread: true, FollowThreads: true},
			feishu.Options{Redis: client, Prefix: r.Prefix, RetryBase: 5 * time.Millisecond, ChatInterval: time.Millisecond,
				CardUpdateInterval: time.Millisecond, TypingEmoji: "-"}, m, log)
	}
	m := feishuQuestion("what now?")
	shown := func() bool {
		vis := fake.Visible()
		return len(vis) == 1 && vis[0].Streaming && vis[0].Text != "" && strings.HasPrefix(takeoverAnswer, strings.TrimSpace(vis[0].Text))
	}
	answered := func() bool {
		vis := fake.Visible()
		return len(vis) == 1 && vis[0].Text == takeoverAnswer && !vis[0].Streaming
	}
	a, _, _ := takeOver(t, r, m, shown, answered, newFeishu)
	a.kill()
	vis := fake.Visible()
	if len(vis) != 1 || vis[0].Text != takeoverAnswer || vis[0].CardID == "" || vis[0].Streaming {
		t.Fatalf("visible %+v; want the card finished in place, alone", vis)
	}
	if n := len(fake.Sent()); n != 1 {
		t.Errorf("%d messages sent; want the one card", n)
	}
}
