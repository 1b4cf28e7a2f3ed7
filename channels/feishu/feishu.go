// Package feishu is the Feishu/Lark channel: group bots that answer when
// @mentioned (and keep answering in the thread they were asked in), and
// direct chats.
//
// Events arrive over two transports that share one dispatch: the long
// connection (a WebSocket opened from here, so no public URL is needed; it
// runs unless Mode is "webhook") and the HTTP callback POST /feishu/events.
// HTTP callbacks are verified here before anything is parsed — signature and
// freshness, the Verification Token on every event, AES-256-CBC with strict
// PKCS#7 unpadding, a 1 MiB body limit — because the SDK's checks are
// incomplete. Replies are interactive cards with a markdown element, sent
// with the Open API client of github.com/larksuite/oapi-sdk-go/v3 (its core
// package), whose token manager keeps the tenant token fresh; an answer
// being written is shown live in a streaming card (stream.go).
package feishu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/internal/chatpace"
	"github.com/parleyhq/parley/internal/logthrottle"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/outbound"
	"github.com/parleyhq/parley/retry"
	"github.com/parleyhq/parley/sessions"
)

// Name is the platform name in conversation keys, policies and metrics.
const Name = "feishu"

// Hosts of the Open API (and of the long-connection endpoint).
const (
	FeishuBaseURL = "https://open.feishu.cn"
	LarkBaseURL   = "https://open.larksuite.com"
)

// EventsPath is the HTTP callback route.
const EventsPath = "/feishu/events"

// Options are the parts of an Adapter that the file does not set: where
// it hands messages and keeps state, and the timings tests shorten. The
// zero value is ready to use.
type Options struct {
	// Handler receives verified messages. When nil, the handler given to
	// Run is used (HTTP callbacks are refused until then).
	Handler channels.Handler
	// Redis remembers answered threads and the notes already sent; keys
	// start with Prefix. Nil keeps them in this process only.
	Redis  redis.UniversalClient
	Prefix string
	// ThreadTTL is how long an answered thread is followed (default
	// sessions.history_ttl's, sessions.DefaultConfig).
	ThreadTTL time.Duration
	// HTTPClient is used for the Open API and the long-connection endpoint
	// (default: a client with a 30 s timeout).
	HTTPClient *http.Client

	// Now is the clock of the signature freshness check (default time.Now).
	Now func() time.Time
	// MaxSkew is the accepted age of X-Lark-Request-Timestamp (default 5 min).
	MaxSkew time.Duration
	// SubmitTimeout bounds the work done before a callback is acked
	// (default 2 s; Feishu wants an answer within 3 s).
	SubmitTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the long connection's backoff
	// (defaults 1 s and 2 min).
	ReconnectMin, ReconnectMax time.Duration
	// Attempts bounds the tries of one Open API call (default 3).
	Attempts int
	// RetryBase is the first backoff of a retried API call (default 500 ms).
	RetryBase time.Duration
	// RetryMax is the longest backoff of a retried API call (default 8 ×
	// RetryBase).
	RetryMax time.Duration
	// ChatInterval is the minimum gap between two messages sent to one chat
	// (default 200 ms: Feishu allows 5 per second per chat).
	ChatInterval time.Duration
	// TypingEmoji is the reaction put on a message while its turn runs
	// (default "Typing"); "-" disables it.
	TypingEmoji string
	// ChunkBytes is the size of one card of a split answer (default 8000).
	ChunkBytes int
	// CardUpdateInterval is the least time between two updates of a live
	// reply's card (default 100 ms: Feishu allows 10 a second per card).
	CardUpdateInterval time.Duration
	// StreamMinChars is the least new text worth an update of a live card
	// while it is written (default MinStreamChars).
	StreamMinChars int
	// Account is the account (feishu.accounts.NAME) the adapter serves,
	// "" for the section's own app: its messages carry it, its route ends
	// in /NAME, what it remembers of threads is its own, and it is the
	// account label of its metrics.
	Account string
}

// Defaults of Options.
const (
	DefaultMaxSkew       = 5 * time.Minute
	DefaultSubmitTimeout = 2 * time.Second
	DefaultReconnectMin  = time.Second
	DefaultReconnectMax  = 2 * time.Minute
	DefaultRetryBase     = 500 * time.Millisecond
	DefaultChatInterval  = 200 * time.Millisecond
	DefaultTypingEmoji   = "Typing"
	DefaultChunkBytes    = 8000
	httpTimeout          = 30 * time.Second
	// DefaultAttempts bounds the tries of one Open API call.
	DefaultAttempts = 3
)

func (o Options) withDefaults() Options {
	if o.HTTPClient == nil {
		o.HTTPClient = outbound.Client(outbound.Options{Timeout: httpTimeout})
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxSkew <= 0 {
		o.MaxSkew = DefaultMaxSkew
	}
	if o.SubmitTimeout <= 0 {
		o.SubmitTimeout = DefaultSubmitTimeout
	}
	if o.ReconnectMin <= 0 {
		o.ReconnectMin = DefaultReconnectMin
	}
	if o.ReconnectMax < o.ReconnectMin {
		o.ReconnectMax = max(DefaultReconnectMax, o.ReconnectMin)
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultAttempts
	}
	if o.RetryBase <= 0 {
		o.RetryBase = DefaultRetryBase
	}
	if o.RetryMax < o.RetryBase {
		o.RetryMax = 8 * o.RetryBase
	}
	if o.ChatInterval <= 0 {
		o.ChatInterval = DefaultChatInterval
	}
	if o.TypingEmoji == "" {
		o.TypingEmoji = DefaultTypingEmoji
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	if o.CardUpdateInterval <= 0 {
		o.CardUpdateInterval = DefaultCardUpdateInterval
	}
	if o.StreamMinChars <= 0 {
		o.StreamMinChars = MinStreamChars
	}
	if o.ThreadTTL <= 0 {
		o.ThreadTTL = sessions.DefaultConfig().HistoryTTL
	}
	return o
}

// Adapter is the Feishu channel.
type Adapter struct {
	cfg      Config
	opts     Options
	base     string
	api      *larkcore.Config // the Open API client's settings and token cache
	log      *slog.Logger
	m        *metrics.Metrics
	calls    *retry.Retrier // Open API calls
	http     *http.Client
	state    stateStore
	limiter  *chatLimiter        // without Redis
	chatPace chatpace.Pacer      // with Redis: the chat's budget over every replica
	live     liveModes           // the first mode of a live reply, by workspace
	names    *channels.NameCache // senders' names of room reads (names.go)
	// refusals keeps refused callbacks from flooding the log.
	refusals *logthrottle.Throttle
	// actions are the card clicks waiting for the gateway's answer, by
	// their MetaCardAction key.
	actions sync.Map

	mu      sync.Mutex
	handler channels.Handler
	botID   string
	running bool  // Run is active
	wsUp    bool  // the long connection is open
	wsErr   error // why it is not
	// identityErr is Feishu's refusal of the bot's identity (nil once it
	// is known, and while its fetch only failed in ways that may pass).
	identityErr error
}

var (
	_ channels.Channel     = (*Adapter)(nil)
	_ channels.Runner      = (*Adapter)(nil)
	_ channels.Typing      = (*Adapter)(nil)
	_ channels.HTTPChannel = (*Adapter)(nil)
	_ channels.Health      = (*Adapter)(nil)
)

// New validates cfg and builds the adapter; nothing is contacted until Run
// or the first event. m nil counts into a private registry; log nil
// discards.
func New(cfg Config, opts Options, m *metrics.Metrics, log *slog.Logger) (*Adapter, error) {
	if cfg.AppID == "" || !cfg.AppSecret.IsSet() {
		return nil, errors.New("feishu: app_id and app_secret are required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("feishu: %w", err)
	}
	opts = opts.withDefaults()
	if m == nil {
		m = metrics.New()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", Name)
	if opts.Account != "" {
		log = log.With("account", opts.Account)
	}
	if !cfg.VerificationToken.IsSet() && !cfg.EncryptKey.IsSet() {
		log.Warn("neither verification_token nor encrypt_key is set: HTTP callbacks on " + EventsPath + " are refused; only the long connection delivers events")
	}
	calls := m.PlatformCalls
	opts.HTTPClient = outbound.Counted(opts.HTTPClient, func(r *http.Request) {
		calls.WithLabelValues(Name, callMethod(r.URL.Path)).Inc()
	})
	sdkLog := sdkLogger{log.With("sdk", "oapi-sdk-go")}
	a := &Adapter{
		cfg:  cfg,
		opts: opts,
		base: cfg.baseURL(),
		log:  log,
		m:    m,
		calls: retry.New(Name, retry.Policy{
			Attempts: opts.Attempts, MinWait: opts.RetryBase, MaxWait: opts.RetryMax,
		}, m, log),
		http:     opts.HTTPClient,
		handler:  opts.Handler,
		limiter:  newChatLimiter(opts.ChatInterval),
		refusals: logthrottle.New(logthrottle.DefaultEvery, opts.Now),
		names:    channels.NewNameCache(opts.Redis, opts.Prefix+"feishu:name:"),
	}
	a.api = newAPIConfig(cfg.AppID, cfg.AppSecret.Reveal(), a.base, opts.HTTPClient, sdkLog)
	if opts.Redis != nil {
		// Threads one app answered are not the other app's to follow.
		statePrefix := opts.Prefix
		if opts.Account != "" {
			statePrefix += "account:" + opts.Account + ":"
		}
		a.state = &redisState{client: opts.Redis, prefix: statePrefix}
		a.chatPace = chatpace.Pacer{Client: opts.Redis, Prefix: opts.Prefix}
	} else {
		a.state = newMemState()
	}
	a.m.AccountUp.WithLabelValues(Name, a.accountLabel()).Set(0) // until the bot is known
	return a, nil
}

// newAPIConfig sets up the SDK's Open API client as lark.NewClient does for
// a self-built app (token cache on, the base URL, HTTP client and logger
// given), without the SDK's root package: that package imports every one of
// the SDK's ~120 API packages, about a quarter of a cold build's compile
// time, for the one generic call made here (larkcore.Request).
func newAPIConfig(appID, appSecret, base string, hc *http.Client, log larkcore.Logger) *larkcore.Config {
	c := &larkcore.Config{
		BaseUrl:          base,
		AppId:            appID,
		AppSecret:        appSecret,
		EnableTokenCache: true,
		AppType:          larkcore.AppTypeSelfBuilt,
		HttpClient:       hc,
		Logger:           log,
		LogLevel:         larkcore.LogLevelWarn,
	}
	larkcore.NewLogger(c)
	larkcore.NewCache(c)
	larkcore.NewSerialization(c)
	larkcore.NewHttpClient(c)
	return c
}

// Name implements channels.Channel.
func (a *Adapter) Name() string { return Name }

// BaseURL is the Open API host in use.
func (a *Adapter) BaseURL() string { return a.base }

// longConnection reports whether Run opens the long connection.
func (a *Adapter) longConnection() bool { return a.cfg.Mode != "webhook" }

// Ready implements channels.Health: with the long connection enabled, it is
// an error while the connection is not open.
func (a *Adapter) Ready() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.botID == "" && a.identityErr != nil {
		// The app cannot learn who its bot is (a revoked secret, the bot
		// capability off): it cannot tell its mentions in a group.
		return fmt.Errorf("bot identity unknown: %w", a.identityErr)
	}
	if !a.longConnection() {
		return nil
	}
	if !a.running {
		return errors.New("long connection not started")
	}
	if !a.wsUp {
		if a.wsErr != nil {
			return fmt.Errorf("long connection down: %w", a.wsErr)
		}
		return errors.New("long connection not yet established")
	}
	return nil
}

func (a *Adapter) setConnected(up bool, err error) {
	a.mu.Lock()
	a.wsUp, a.wsErr = up, err
	a.mu.Unlock()
	v := 0.0
	if up {
		v = 1
	}
	if a.opts.Account == "" {
		// parley_channel_connected is the platform's series, the default
		// app's; every account's connection shows in parley_account_up.
		a.m.ChannelConnected.WithLabelValues(Name).Set(v)
	}
	a.showUp()
}

// Run implements channels.Runner. It learns the bot's own open_id (needed
// to tell a mention of the bot) and runs the long connection unless Mode
// is webhook.
func (a *Adapter) Run(ctx context.Context, h channels.Handler) error {
	a.mu.Lock()
	if a.handler == nil {
		a.handler = h
	}
	a.running = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.running = false
		a.mu.Unlock()
	}()

	var wg sync.WaitGroup
	wg.Go(func() { a.learnBotID(ctx) })
	if a.longConnection() {
		a.setConnected(false, nil)
		wg.Go(func() { a.runLongConnection(ctx) })
	}
	<-ctx.Done()
	wg.Wait()
	if a.longConnection() {
		a.setConnected(false, context.Cause(ctx))
	}
	return nil
}

// learnBotID fetches the bot's open_id, retrying with backoff until it
// succeeds or ctx ends. Until then group mentions cannot be recognised.
func (a *Adapter) learnBotID(ctx context.Context) {
	identity := a.calls.Once() // RetryUntil does the retrying, and says so
	_ = retry.RetryUntil(ctx, retry.New(Name, retry.Policy{MinWait: a.opts.ReconnectMin, MaxWait: a.opts.ReconnectMax}, a.m, a.log),
		"bot_info", func(ctx context.Context) error {
			_, err := a.botOpenID(ctx, identity)
			a.noteIdentity(err)
			return err
		})
}

// noteIdentity keeps why the bot's identity is refused, for Ready: only
// a refusal (a revoked secret, the bot capability off), not a failure
// that may pass — an outage of Feishu's API must not take the replica
// out of its load balancer while webhooks still arrive.
func (a *Adapter) noteIdentity(err error) {
	var refused *APIError
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case err == nil:
		a.identityErr = nil
	case errors.As(err, &refused) && !refused.Retryable():
		a.identityErr = err
	}
}

func (a *Adapter) cachedBotID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botID
}

// botOpenID returns the bot's own open_id, fetching it once with calls.
func (a *Adapter) botOpenID(ctx context.Context, calls *retry.Retrier) (string, error) {
	a.mu.Lock()
	id := a.botID
	a.mu.Unlock()
	if id != "" {
		return id, nil
	}
	var out struct {
		Bot struct {
			OpenID  string `json:"open_id"`
			AppName string `json:"app_name"`
		} `json:"bot"`
	}
	if err := a.callWith(ctx, calls, "bot_info", http.MethodGet, "/open-apis/bot/v3/info", nil, nil, nil, &out); err != nil {
		return "", err
	}
	if out.Bot.OpenID == "" {
		return "", errors.New("feishu: bot info has no open_id (is the bot capability enabled?)")
	}
	a.mu.Lock()
	a.botID = out.Bot.OpenID
	a.mu.Unlock()
	a.showUp()
	a.log.Info("bot identity learned", "open_id", out.Bot.OpenID, "name", out.Bot.AppName)
	return out.Bot.OpenID, nil
}

func (a *Adapter) currentHandler() channels.Handler {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.handler
}

// sdkLogger routes the SDK's log lines to slog.
type sdkLogger struct{ l *slog.Logger }

func (s sdkLogger) Debug(ctx context.Context, a ...any) { s.l.DebugContext(ctx, fmt.Sprint(a...)) }
func (s sdkLogger) Info(ctx context.Context, a ...any)  { s.l.InfoContext(ctx, fmt.Sprint(a...)) }
func (s sdkLogger) Warn(ctx context.Context, a ...any)  { s.l.WarnContext(ctx, fmt.Sprint(a...)) }
func (s sdkLogger) Error(ctx context.Context, a ...any) { s.l.ErrorContext(ctx, fmt.Sprint(a...)) }
