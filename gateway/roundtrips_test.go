package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	openai "github.com/sashabaranov/go-openai"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/gateway/outbox"
	"github.com/parleyhq/parley/gateway/quota"
	"github.com/parleyhq/parley/gateway/usage"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
)

// poster is a recorder that posts part by part at a pace, as the Slack
// adapter does, so that its replies go through the outbox and each post
// takes its slot from the chat's budget in Redis.
type poster struct{ *recorder }

func (p poster) Parts(_ channels.Message, r channels.Reply) []string { return []string{r.Text} }
func (p poster) Post(ctx context.Context, m channels.Message, part string) (string, error) {
	return "", p.Send(ctx, m, channels.Reply{Text: part})
}
func (p poster) Pace() channels.Pace { return channels.Pace{Every: 10 * time.Millisecond} }

// commandLog is a go-redis hook that keeps what each round trip sent: one
// entry per command, or per pipeline with its commands.
type commandLog struct {
	mu    sync.Mutex
	trips []string
}

func (l *commandLog) add(cmds ...redis.Cmder) {
	if handshake(cmds) {
		return
	}
	names := make([]string, len(cmds))
	for i, c := range cmds {
		// A command's key, or a script's first, says what it is.
		args := c.Args()
		names[i] = fmt.Sprint(args[0])
		key := 1
		if names[i] == "evalsha" || names[i] == "eval" {
			key = 3
		}
		if len(args) > key {
			names[i] += " " + fmt.Sprint(args[key])
		}
	}
	l.mu.Lock()
	l.trips = append(l.trips, strings.Join(names, " + "))
	l.mu.Unlock()
}

// handshake reports whether cmds are a new connection's set-up (go-redis
// names the client to the server on each connection it dials). The pool
// dials when load keeps its connections busy, so that trip belongs to the
// connection, not to the turn being counted.
func handshake(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		switch strings.ToLower(c.Name()) {
		case "hello", "auth", "select":
		case "client":
			if len(c.Args()) < 2 || !strings.EqualFold(fmt.Sprint(c.Args()[1]), "setinfo") {
				return false
			}
		default:
			return false
		}
	}
	return len(cmds) > 0
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }
func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.add(cmd)
		return next(ctx, cmd)
	}
}
func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		l.add(cmds...)
		return next(ctx, cmds)
	}
}

func (l *commandLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.trips...)
}

// usageRig is a gateway as `parley serve` builds one: usage report, and
// with a posting channel, the paced outbox.
type usageRig struct {
	gw      *gateway.Gateway
	store   *sessions.RedisStore
	usage   *usage.Store
	model   *openaitest.Server
	ch      *recorder
	metrics *metrics.Metrics
}

func newUsageRig(t *testing.T, client redis.UniversalClient, prefix string, posts bool, opts ...openaitest.Option) *usageRig {
	t.Helper()
	return newUsageRigWith(t, gateway.Config{}, client, prefix, posts, opts...)
}

// livePoster is poster with live replies that show nothing (a model that
// answers in one piece, a workspace that allows edits only): each reply
// is posted, through the outbox.
type livePoster struct{ poster }

func (livePoster) StartReply(context.Context, channels.Message) (channels.ReplySink, error) {
	return unshownSink{}, nil
}

type unshownSink struct{}

func (unshownSink) Show(context.Context, channels.Progress) (bool, error) { return false, nil }
func (unshownSink) Finish(context.Context, channels.Reply) error          { return channels.ErrNotShown }
func (unshownSink) Discard(context.Context) error                         { return nil }
func (unshownSink) Unshown() bool                                         { return true }

// shownPoster is poster with live replies that show the answer as it
// comes and name what they show (channels.Referenced).
type shownPoster struct{ poster }

func (p shownPoster) StartReply(_ context.Context, m channels.Message) (channels.ReplySink, error) {
	return &shownSink{p: p.poster, m: m}, nil
}

type shownSink struct {
	p     poster
	m     channels.Message
	shown bool
}

func (s *shownSink) Show(_ context.Context, p channels.Progress) (bool, error) {
	s.shown = s.shown || p.Kind == channels.ProgressText
	return s.shown, nil
}
func (s *shownSink) Finish(ctx context.Context, r channels.Reply) error { return s.p.Send(ctx, s.m, r) }
func (s *shownSink) Discard(context.Context) error                      { return nil }
func (s *shownSink) Reference() string {
	if !s.shown {
		return ""
	}
	return "shown:" + s.m.Chat
}

// newUsageRigWith is newUsageRig on cfg.
func newUsageRigWith(t *testing.T, cfg gateway.Config, client redis.UniversalClient, prefix string, posts bool, opts ...openaitest.Option) *usageRig {
	t.Helper()
	var ch func(*recorder) channels.Channel
	if posts {
		ch = func(r *recorder) channels.Channel { return poster{r} }
	}
	return newUsageRigOn(t, cfg, client, prefix, ch, opts...)
}

// newUsageRigOn is newUsageRigWith with the channel ch makes of the
// recorder (nil: the recorder itself, without an outbox).
func newUsageRigOn(t *testing.T, cfg gateway.Config, client redis.UniversalClient, prefix string, ch func(*recorder) channels.Channel, opts ...openaitest.Option) *usageRig {
	t.Helper()
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The default lock TTL: no renewal runs during a turn this short.
	store := sessions.NewRedis(client, sessions.Options{Prefix: prefix})
	model := openaitest.New(t, opts...)
	a := agent.New(agent.Config{Model: "test", Timeout: 5 * time.Second, MaxRetries: 1, BackoffBase: time.Millisecond},
		agent.NewClient(model.URL(), "sk-test", nil), agent.NewRegistry(), m, log)
	rg := &usageRig{store: store, usage: usage.New(client, prefix), model: model, ch: newRecorder("slack"), metrics: m}
	cfg.Usage = rg.usage
	var registered channels.Channel = rg.ch
	if ch != nil {
		// No poll for failed replies while a test counts round trips.
		cfg.Outbox = outbox.New(client, prefix, outbox.Config{Poll: time.Hour}, m, log)
		registered = ch(rg.ch)
	}
	rg.gw = gateway.New(cfg, store, a, m, log)
	rg.gw.Register(registered)
	rg.gw.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rg.gw.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return rg
}

// answered waits until n replies were sent and counted: the turns that
// made them have nothing left to do.
func (rg *usageRig) answered(t *testing.T, n int) []sent {
	t.Helper()
	got := rg.ch.wait(t, n)
	until(t, "the replies counted", func() bool {
		return testutil.ToFloat64(rg.metrics.RepliesSent.WithLabelValues("slack", "ok")) >= float64(n)
	})
	return got
}

// turnsRecorded is the turns the usage report holds for the slack channel.
func (rg *usageRig) turnsRecorded(t *testing.T) usage.Row {
	t.Helper()
	rep, err := rg.usage.Read(context.Background(), time.Hour, usage.ByChannel)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Rows {
		if r.Channel == "slack" {
			return r
		}
	}
	return usage.Row{}
}

// TestAPlainTurnIsTwoRoundTrips: a turn that answers a message costs two
// Redis round trips with everything `parley serve` does on it — the claim,
// and the completion with the usage record and the post's pacing slot
// riding in its pipeline — besides the one of accepting the message. A
// daily token budget adds its check before the model, and its count rides
// with the completion too.
func TestAPlainTurnIsTwoRoundTrips(t *testing.T) {
	t.Parallel()
	plain := func(r *recorder) channels.Channel { return poster{r} }
	cases := []struct {
		name  string
		cfg   func(*redistest.Redis) gateway.Config
		ch    func(*recorder) channels.Channel
		trips int
	}{
		{"usage report", func(*redistest.Redis) gateway.Config { return gateway.Config{} }, plain, 2},
		{"and a daily token budget", func(r *redistest.Redis) gateway.Config {
			return gateway.Config{Quotas: quota.New(r.Client, r.Prefix),
				Policy: policy.New(policy.Config{Default: config.Level{Budget: config.Budget{TokensPerUserDay: new(int64(1000))}}})}
		}, plain, 3},
		{"a live reply that showed nothing", func(*redistest.Redis) gateway.Config { return gateway.Config{} },
			func(r *recorder) channels.Channel { return livePoster{poster{r}} }, 2},
		// One write more, when the reply first shows: its record with the
		// turn, for the next holder should this replica die mid-answer.
		{"a live reply that showed its answer", func(*redistest.Redis) gateway.Config { return gateway.Config{} },
			func(r *recorder) channels.Channel { return shownPoster{poster{r}} }, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := redistest.New(t)
			log := &commandLog{}
			r.Client.AddHook(log)
			rg := newUsageRigOn(t, c.cfg(r), r.Client, r.Prefix, c.ch,
				openaitest.WithResponder(func(openai.ChatCompletionRequest) openaitest.Step {
					return openaitest.Text("fine").WithUsage(openai.Usage{PromptTokens: 40, CompletionTokens: 2, TotalTokens: 42})
				}))
			// Each message in a chat of its own, as in the benchmark: a post
			// that waits for its chat's slot checks the chat's hold once more
			// after the wait.
			chat := func(i int) channels.Message {
				m := msg("t", fmt.Sprint("E", i), "hello")
				m.Chat = fmt.Sprint("C", i)
				return m
			}
			// The first turn also opens connections and loads the scripts
			// into this new Redis.
			if err := rg.gw.Submit(context.Background(), chat(0)); err != nil {
				t.Fatal(err)
			}
			rg.answered(t, 1)
			for i := 1; i <= 3; i++ {
				before := len(log.snapshot())
				if err := rg.gw.Submit(context.Background(), chat(i)); err != nil {
					t.Fatal(err)
				}
				rg.answered(t, i+1)
				var trips []string
				for _, trip := range log.snapshot()[before:] {
					// The outbox looks for failed replies on its own
					// schedule (once at start here), not as part of a turn.
					if !strings.Contains(trip, ":outbox:{outbox}:") {
						trips = append(trips, trip)
					}
				}
				// One of them is Submit's: the de-dup and the enqueue, one script.
				if turn := len(trips) - 1; turn > c.trips {
					t.Errorf("turn %d: %d round trips, want at most %d:\n  %s", i, turn, c.trips, strings.Join(trips, "\n  "))
				}
			}
			if row := rg.turnsRecorded(t); row.Turns != 4 || row.Prompt != 160 || row.Completion != 8 {
				t.Errorf("usage = %+v; want 4 turns of 40 + 2 tokens", row)
			}
			for i := range 4 {
				h, err := rg.store.History(context.Background(), chat(i).ConversationKey())
				if err != nil || len(h) != 2 {
					t.Errorf("history of chat %d = %+v, %v; want the turn", i, h, err)
				}
			}
			if c.cfg(r).Quotas == nil {
				return
			}
			spent, err := quota.New(r.Client, r.Prefix).Spent(context.Background(), quota.Subject{Channel: "slack", Workspace: "T1", User: "U1"})
			if err != nil || spent != 4*42 {
				t.Errorf("budget spent = %d, %v; want 4 turns of 42 tokens", spent, err)
			}
			if n := testutil.CollectAndCount(rg.metrics.BudgetUsed); n != 1 {
				t.Errorf("budget series = %d; want the turns observed", n)
			}
		})
	}
}

// TestUsageRidesWithTheCompletionOnACluster: the usage record and the
// completion go in one pipeline although their keys live on different
// masters of a Redis Cluster; both land.
func TestUsageRidesWithTheCompletionOnACluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t)
	ctx := context.Background()
	rg := newUsageRig(t, c.Client, c.Prefix, false)
	// The usage hash of this hour and of the next (should the hour turn
	// during the test) are on one master or two; a thread whose history is
	// on neither makes the pipeline span nodes.
	usageNodes := map[string]bool{}
	for _, at := range []time.Time{time.Now(), time.Now().Add(time.Hour)} {
		n, err := c.Client.MasterForKey(ctx, c.Prefix+"usage:{"+at.UTC().Format("2006-01-02T15")+"}")
		if err != nil {
			t.Fatal(err)
		}
		usageNodes[n.Options().Addr] = true
	}
	thread := ""
	for i := 0; thread == "" && i < 100; i++ {
		conv := msg(fmt.Sprint("t", i), "", "").ConversationKey()
		n, err := c.Client.MasterForKey(ctx, c.Prefix+"conv:{"+conv+"}:history")
		if err != nil {
			t.Fatal(err)
		}
		if !usageNodes[n.Options().Addr] {
			thread = fmt.Sprint("t", i)
		}
	}
	if thread == "" {
		t.Fatal("no thread's history lands on another master than the usage hash")
	}
	for i, text := range []string{"hello", "again"} {
		if err := rg.gw.Submit(ctx, msg(thread, fmt.Sprint("E", i), text)); err != nil {
			t.Fatal(err)
		}
		rg.answered(t, i+1)
	}
	h, err := rg.store.History(ctx, msg(thread, "", "").ConversationKey())
	if err != nil || len(h) != 4 || h[3].Content != "echo: again" {
		t.Fatalf("history = %+v, %v; want both turns", h, err)
	}
	if row := rg.turnsRecorded(t); row.Turns != 2 || row.Prompt <= 0 || row.Completion <= 0 {
		t.Errorf("usage = %+v; want both turns' tokens", row)
	}
}

// TestUsageAndTurnLandAfterRedisForgetsItsScripts: a Redis that restarted
// knows none of the scripts; the pipeline's EVALSHAs are refused, and the
// completion and the usage record are each run again by themselves, once.
func TestUsageAndTurnLandAfterRedisForgetsItsScripts(t *testing.T) {
	t.Parallel()
	r := redistest.NewOwn(t) // its SCRIPT FLUSH is of the whole server
	ctx := context.Background()
	rg := newUsageRig(t, r.Client, r.Prefix, false)
	for i, text := range []string{"hello", "again"} {
		if err := r.Client.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rg.gw.Submit(ctx, msg("t", fmt.Sprint("E", i), text)); err != nil {
			t.Fatal(err)
		}
		if got := rg.answered(t, i+1); got[i].reply.Text != "echo: "+text {
			t.Fatalf("reply = %+v", got[i].reply)
		}
	}
	h, err := rg.store.History(ctx, msg("t", "", "").ConversationKey())
	if err != nil || len(h) != 4 {
		t.Fatalf("history = %+v, %v; want both turns once", h, err)
	}
	if row := rg.turnsRecorded(t); row.Turns != 2 {
		t.Errorf("usage = %+v; want both turns, each once", row)
	}
}

// TestALockLostTurnStillCountsItsTokens: a turn whose lock was taken over
// while the model answered writes nothing (its next holder answers the
// message), but the tokens it spent are in the usage report: they were
// spent.
func TestALockLostTurnStillCountsItsTokens(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	asked, steal := make(chan struct{}), make(chan struct{})
	var once sync.Once
	rg := newUsageRig(t, r.Client, r.Prefix, false, openaitest.WithResponder(func(req openai.ChatCompletionRequest) openaitest.Step {
		once.Do(func() {
			close(asked)
			<-steal
		})
		return openaitest.Echo(req)
	}))
	conv := msg("t", "", "").ConversationKey()
	if err := rg.gw.Submit(ctx, msg("t", "E1", "hello")); err != nil {
		t.Fatal(err)
	}
	<-asked
	// Another holder's lock, for long enough that this turn cannot win it back.
	if err := r.Client.Set(ctx, r.Prefix+"conv:{"+conv+"}:lock", "another-replica", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	close(steal)
	until(t, "the turn's tokens recorded", func() bool { return rg.turnsRecorded(t).Turns == 1 })
	until(t, "the turn given up", func() bool {
		return testutil.CollectAndCount(rg.metrics.TurnDuration) == 1
	})
	if h, err := rg.store.History(ctx, conv); err != nil || len(h) != 0 {
		t.Errorf("history = %+v, %v; want nothing written without the lock", h, err)
	}
	if n := r.Client.LLen(ctx, r.Prefix+"conv:{"+conv+"}:inbox").Val(); n != 1 {
		t.Errorf("inbox holds %d; want the message still queued for the lock's holder", n)
	}
	if n := len(rg.ch.snapshot()); n != 0 {
		t.Errorf("%d replies sent; want none from a turn that lost its lock", n)
	}
}

// TestAPausedTurnCountsItsTokens: a turn that pauses for an approval
// writes no completion for its usage record to ride with; it is recorded
// by itself, and the resumed turn's tokens with its completion.
func TestAPausedTurnCountsItsTokens(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	_, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	ch := newRecorder("slack")
	report := usage.New(r.Client, r.Prefix)
	a := newApprovalReplicaWith(t, r, mcpURL, model, ch, time.Hour, time.Hour, "slack", func(g *gateway.Config, _ *agent.Config) { g.Usage = report })
	turns := func() int64 {
		rep, err := report.Read(context.Background(), time.Hour, usage.ByChannel)
		if err != nil || len(rep.Rows) == 0 {
			return 0
		}
		return rep.Rows[0].Turns
	}
	submit(t, a.gw, from("U1", "E1", "log deployed v2"))
	p := ch.waitFor(t, 0, "with an approval prompt", isPrompt)
	if n := turns(); n != 1 {
		t.Fatalf("%d turns recorded once the turn paused; want 1", n)
	}
	submit(t, a.gw, from("UADMIN", "E2", "/approve "+ch.at(p).Approval.Code))
	ch.waitFor(t, p, "with the tool's result", textHas("done: appended line"))
	if n := turns(); n != 2 {
		t.Fatalf("%d turns recorded once the resumed turn answered; want 2", n)
	}
}
