// Package feishu is the Feishu/Lark channel: group bots that answer when
// @mentioned (and keep answering in the thread they were asked in), and
// direct chats.
//
// Events arrive over two transports that share one dispatcher: the long
// connection (a WebSocket opened from here, so no public URL is needed; it
// runs unless Mode is "webhook") and the HTTP callback POST /feishu/events.
// HTTP callbacks are verified here before anything is parsed — signature and
// freshness, the Verification Token on every event, AES-256-CBC with strict
// PKCS#7 unpadding, a 1 MiB body limit — because the SDK's checks are
// incomplete. Replies are interactive cards with a markdown element, sent
// with the Open API client of github.com/larksuite/oapi-sdk-go/v3, whose
// token manager keeps the tenant token fresh.
package feishu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher"
	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/retry"
)

// Name is the channel name in conversation keys and metrics.
const Name = "feishu"

// Hosts of the Open API (and of the long-connection endpoint).
const (
	FeishuBaseURL = "https://open.feishu.cn"
	LarkBaseURL   = "https://open.larksuite.com"
)

// EventsPath is the HTTP callback route.
const EventsPath = "/feishu/events"

// Options configure a Channel. AppID and AppSecret are required.
type Options struct {
	AppID             string
	AppSecret         string
	VerificationToken string
	EncryptKey        string
	// BaseURL is the Open API host, also used for the long-connection
	// endpoint ({BaseURL}/callback/ws/endpoint). Empty: by Domain.
	BaseURL string
	// Domain is "feishu" (default) or "lark" (open.larksuite.com).
	Domain string
	// Mode "webhook" turns the long connection off; "" and "websocket"
	// run it. The HTTP route is mounted either way.
	Mode string
	// ReplyInThread answers a mention in a normal group inside a thread of
	// that message.
	ReplyInThread bool
	// FollowThreads continues a thread the bot answered without a new
	// mention (needs the group-message scope).
	FollowThreads bool

	// Handler receives verified messages. When nil, the handler given to
	// Run is used (HTTP callbacks are refused until then).
	Handler channels.Handler
	// Redis remembers answered threads and the notes already sent; keys
	// start with Prefix. Nil keeps them in this process only.
	Redis  redis.UniversalClient
	Prefix string
	// ThreadTTL is how long an answered thread is followed (default 7 days).
	ThreadTTL time.Duration

	Metrics *metrics.Metrics
	Log     *slog.Logger
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
	// RetryBase is the first backoff of a retried API call (default 500 ms).
	RetryBase time.Duration
	// ChatInterval is the minimum gap between two messages sent to one chat
	// (default 200 ms: Feishu allows 5 per second per chat).
	ChatInterval time.Duration
	// TypingEmoji is the reaction put on a message while its turn runs
	// (default "Typing"); "-" disables it.
	TypingEmoji string
	// ChunkBytes is the size of one card of a split answer (default 8000).
	ChunkBytes int
}

// Channel is the Feishu adapter. It implements channels.Channel, Runner,
// HTTPChannel, Typing and Health.
type Channel struct {
	o       Options
	base    string
	api     *lark.Client
	disp    *dispatcher.EventDispatcher
	log     *slog.Logger
	m       *metrics.Metrics
	http    *http.Client
	state   stateStore
	limiter *chatLimiter

	mu       sync.Mutex
	handler  channels.Handler
	botID    string
	running  bool  // Run is active
	wsUp     bool  // the long connection is open
	wsErr    error // why it is not
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
	closed   bool
}

// New validates o and builds the channel; nothing is contacted until Run
// or the first event.
func New(o Options) (*Channel, error) {
	if o.AppID == "" || o.AppSecret == "" {
		return nil, errors.New("feishu: app_id and app_secret are required")
	}
	switch o.Mode {
	case "", "websocket", "webhook":
	default:
		return nil, fmt.Errorf("feishu: mode %q must be webhook or websocket", o.Mode)
	}
	if o.Mode == "webhook" && o.VerificationToken == "" && o.EncryptKey == "" {
		return nil, errors.New("feishu: webhook mode needs verification_token or encrypt_key, or callbacks cannot be authenticated")
	}
	base := strings.TrimRight(o.BaseURL, "/")
	if base == "" {
		switch o.Domain {
		case "", "feishu":
			base = FeishuBaseURL
		case "lark":
			base = LarkBaseURL
		default:
			return nil, fmt.Errorf("feishu: domain %q must be feishu or lark", o.Domain)
		}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	o.Log = o.Log.With("channel", Name)
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxSkew <= 0 {
		o.MaxSkew = 5 * time.Minute
	}
	if o.SubmitTimeout <= 0 {
		o.SubmitTimeout = 2 * time.Second
	}
	if o.ReconnectMin <= 0 {
		o.ReconnectMin = time.Second
	}
	if o.ReconnectMax < o.ReconnectMin {
		o.ReconnectMax = max(2*time.Minute, o.ReconnectMin)
	}
	if o.RetryBase <= 0 {
		o.RetryBase = 500 * time.Millisecond
	}
	if o.ChatInterval <= 0 {
		o.ChatInterval = 200 * time.Millisecond
	}
	if o.TypingEmoji == "" {
		o.TypingEmoji = "Typing"
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = 8000
	}
	if o.ThreadTTL <= 0 {
		o.ThreadTTL = 7 * 24 * time.Hour
	}
	if o.VerificationToken == "" && o.EncryptKey == "" {
		o.Log.Warn("neither verification_token nor encrypt_key is set: HTTP callbacks on " + EventsPath + " are refused; only the long connection delivers events")
	}
	sdkLog := sdkLogger{o.Log.With("component", "sdk")}
	c := &Channel{
		o:    o,
		base: base,
		api: lark.NewClient(o.AppID, o.AppSecret,
			lark.WithOpenBaseUrl(base),
			lark.WithHttpClient(o.HTTPClient),
			lark.WithLogger(sdkLog),
			lark.WithLogLevel(larkcore.LogLevelWarn),
		),
		log:     o.Log,
		m:       o.Metrics,
		http:    o.HTTPClient,
		handler: o.Handler,
		limiter: newChatLimiter(o.ChatInterval),
	}
	if o.Redis != nil {
		c.state = &redisState{client: o.Redis, prefix: o.Prefix}
	} else {
		c.state = newMemState()
	}
	c.bgCtx, c.bgCancel = context.WithCancel(context.Background())
	// One dispatcher for both transports. Verification and decryption of
	// HTTP callbacks happen before it is called, so it gets no token or key.
	c.disp = dispatcher.NewEventDispatcher("", "").OnP2MessageReceiveV1(c.onMessageReceive)
	c.disp.InitConfig(larkevent.WithLogger(sdkLog), larkevent.WithLogLevel(larkcore.LogLevelWarn))
	return c, nil
}

// Name implements channels.Channel.
func (c *Channel) Name() string { return Name }

// BaseURL is the Open API host in use.
func (c *Channel) BaseURL() string { return c.base }

// longConnection reports whether Run opens the long connection.
func (c *Channel) longConnection() bool { return c.o.Mode != "webhook" }

// Ready implements channels.Health: with the long connection enabled, it is
// an error while the connection is not open.
func (c *Channel) Ready() error {
	if !c.longConnection() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return errors.New("long connection not started")
	}
	if !c.wsUp {
		if c.wsErr != nil {
			return fmt.Errorf("long connection down: %w", c.wsErr)
		}
		return errors.New("long connection not yet established")
	}
	return nil
}

func (c *Channel) setConnected(up bool, err error) {
	c.mu.Lock()
	c.wsUp, c.wsErr = up, err
	c.mu.Unlock()
	v := 0.0
	if up {
		v = 1
	}
	c.m.ChannelConnected.WithLabelValues(Name).Set(v)
}

// Run implements channels.Runner. It learns the bot's own open_id (needed
// to tell a mention of the bot), runs the long connection unless Mode is
// webhook, and returns when ctx ends — after every goroutine it or the
// callbacks started has finished.
func (c *Channel) Run(ctx context.Context, h channels.Handler) error {
	c.mu.Lock()
	if c.handler == nil {
		c.handler = h
	}
	c.running = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running = false
		c.closed = true
		c.mu.Unlock()
		c.bgCancel()
		c.bg.Wait()
	}()

	var wg sync.WaitGroup
	wg.Go(func() { c.learnBotID(ctx) })
	if c.longConnection() {
		c.setConnected(false, nil)
		wg.Go(func() { c.runLongConnection(ctx) })
	}
	<-ctx.Done()
	wg.Wait()
	if c.longConnection() {
		c.setConnected(false, context.Cause(ctx))
	}
	return ctx.Err()
}

// learnBotID fetches the bot's open_id, retrying with backoff until it
// succeeds or ctx ends.
func (c *Channel) learnBotID(ctx context.Context) {
	delay := c.o.ReconnectMin
	for {
		_, err := c.botOpenID(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		c.log.Warn("cannot learn the bot's open_id; group mentions cannot be recognised until it is known", "err", err, "retry_in", delay)
		if !retry.Sleep(ctx, delay) {
			return
		}
		delay = min(2*delay, c.o.ReconnectMax)
	}
}

func (c *Channel) cachedBotID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.botID
}

// botOpenID returns the bot's own open_id, fetching it once.
func (c *Channel) botOpenID(ctx context.Context) (string, error) {
	c.mu.Lock()
	id := c.botID
	c.mu.Unlock()
	if id != "" {
		return id, nil
	}
	var out struct {
		Bot struct {
			OpenID  string `json:"open_id"`
			AppName string `json:"app_name"`
		} `json:"bot"`
	}
	if err := c.call(ctx, "bot_info", http.MethodGet, "/open-apis/bot/v3/info", nil, nil, &out); err != nil {
		return "", err
	}
	if out.Bot.OpenID == "" {
		return "", errors.New("feishu: bot info has no open_id (is the bot capability enabled?)")
	}
	c.mu.Lock()
	c.botID = out.Bot.OpenID
	c.mu.Unlock()
	c.log.Info("bot identity learned", "open_id", out.Bot.OpenID, "name", out.Bot.AppName)
	return out.Bot.OpenID, nil
}

func (c *Channel) currentHandler() channels.Handler {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handler
}

// goBackground runs f after the ack, on a goroutine that Run waits for.
func (c *Channel) goBackground(f func(ctx context.Context)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.bg.Go(func() { f(c.bgCtx) })
	return true
}

// sdkLogger routes the SDK's log lines to slog.
type sdkLogger struct{ l *slog.Logger }

func (s sdkLogger) Debug(ctx context.Context, a ...any) { s.l.DebugContext(ctx, fmt.Sprint(a...)) }
func (s sdkLogger) Info(ctx context.Context, a ...any)  { s.l.InfoContext(ctx, fmt.Sprint(a...)) }
func (s sdkLogger) Warn(ctx context.Context, a ...any)  { s.l.WarnContext(ctx, fmt.Sprint(a...)) }
func (s sdkLogger) Error(ctx context.Context, a ...any) { s.l.ErrorContext(ctx, fmt.Sprint(a...)) }
