// Package officialaccount is the WeChat Official Account channel (公众号),
// platform wechat_oa: users write to the account, WeChat posts each
// message to /wechat/oa, and the answer goes back as the callback's
// passive reply when it is ready within about 4.5 seconds, otherwise as a
// customer-service message (message/custom/send), which WeChat allows for
// 48 hours after the user's last message.
//
// Callbacks come in the account's message mode: plaintext (signed with
// the Token), compatible or safe (encrypted with the EncodingAESKey; with
// a key configured, only those are accepted). They are verified before
// anything reads them (package wxcrypto).
//
// The callback handler hands the message to the gateway and holds the
// request open for its answer. The turn may run on another replica: the
// handler and the turn's Send meet in Redis (see passive.go), and exactly
// one of them delivers the answer. While a slow turn runs, the user sees
// "typing" (message/custom/typing). An answer that finds the 48-hour
// window closed is kept, and delivered with a note when the user writes
// again. The access token is shared through Redis (package wxapi).
package officialaccount

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wxapi"
	"github.com/parleyhq/parley/channels/wechat/wxcrypto"
	"github.com/parleyhq/parley/internal/logthrottle"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/retry"
)

// Name is the platform name in conversation keys, policies and metrics.
const Name = "wechat_oa"

// Path is the callback route (GET: the URL check; POST: messages).
const Path = "/wechat/oa"

// Options are the parts of an Adapter that the file does not set. Zero
// fields take the defaults; Redis is required.
type Options struct {
	// Handler receives verified messages. When nil, the handler given to
	// Run is used (callbacks are answered 503 until then).
	Handler channels.Handler
	// Redis holds the passive-reply states, the access token and the
	// answers held for a closed window; keys start with Prefix.
	Redis  redis.UniversalClient
	Prefix string
	// Account is the account (wechat_oa.accounts.NAME) the adapter
	// serves, "" for the section's own: its route is Path/NAME and its
	// messages carry it (Message.Account). Its Redis keys are its app id's.
	Account string
	// Now is the clock of the timestamp check and of the messages
	// (default time.Now).
	Now func() time.Time
	// Window is how far a callback's timestamp may be from Now (default
	// wxcrypto.DefaultWindow).
	Window time.Duration
	// BodyTimeout bounds the arrival of a callback's body (default
	// wxcrypto.DefaultBodyTimeout).
	BodyTimeout time.Duration
	// SubmitTimeout bounds the hand-over to the gateway (default 2 s).
	SubmitTimeout time.Duration
	// PassiveWait is how long a callback waits for its answer, from its
	// arrival, before answering empty (default 4.5 s: WeChat waits 5).
	PassiveWait time.Duration
	// StateTTL is how long the passive state of a message is kept
	// (default 10 minutes; WeChat's retries come within seconds).
	StateTTL time.Duration
	// HeldTTL is how long an answer that met a closed window waits for
	// the user to write again (default 7 days).
	HeldTTL time.Duration
	// TypingEvery repeats "typing" while a turn runs; TypingWindow is how
	// long after the user's message WeChat accepts it (defaults 15 s and
	// 30 s, WeChat's rules).
	TypingEvery, TypingWindow time.Duration
	// API shapes the calls to the API and the shared token.
	API wxapi.ClientOptions
}

// Defaults of Options.
const (
	DefaultSubmitTimeout = 2 * time.Second
	DefaultPassiveWait   = 4500 * time.Millisecond
	DefaultStateTTL      = 10 * time.Minute
	DefaultHeldTTL       = 7 * 24 * time.Hour
	DefaultTypingEvery   = 15 * time.Second
	DefaultTypingWindow  = 30 * time.Second
	// pollEvery is how often the last second of a wait is polled.
	pollEvery = 50 * time.Millisecond
)

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Window <= 0 {
		o.Window = wxcrypto.DefaultWindow
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = wxcrypto.DefaultBodyTimeout
	}
	if o.SubmitTimeout <= 0 {
		o.SubmitTimeout = DefaultSubmitTimeout
	}
	if o.PassiveWait <= 0 {
		o.PassiveWait = DefaultPassiveWait
	}
	if o.StateTTL <= 0 {
		o.StateTTL = DefaultStateTTL
	}
	if o.HeldTTL <= 0 {
		o.HeldTTL = DefaultHeldTTL
	}
	if o.TypingEvery <= 0 {
		o.TypingEvery = DefaultTypingEvery
	}
	if o.TypingWindow <= 0 {
		o.TypingWindow = DefaultTypingWindow
	}
	return o
}

// Adapter is the Official Account channel.
type Adapter struct {
	cfg     Config
	opts    Options
	log     *slog.Logger
	m       *metrics.Metrics
	crypter *wxcrypto.Crypter
	api     *wxapi.Client
	typing  *retry.Retrier // one try: a typing indicator is not worth a retry
	passive *passive
	// replays refuses a signed query seen before with another body.
	replays *wxcrypto.Replays
	// refusals keeps refused callbacks from flooding the log.
	refusals *logthrottle.Throttle

	mu      sync.Mutex
	handler channels.Handler

	// bg runs typing indicators and answers whose callback went away; it
	// ends with Run.
	bg channels.Background
}

var (
	_ channels.Channel     = (*Adapter)(nil)
	_ channels.Runner      = (*Adapter)(nil)
	_ channels.Typing      = (*Adapter)(nil)
	_ channels.HTTPChannel = (*Adapter)(nil)
)

// Errcodes of the Official Account API that change what the adapter does.
const (
	codeWindowClosed = 45015 // response out of time limit (48 h) or unsubscribed
	codeSendLimit    = 45047 // out of response count limit
)

// codes are the errcodes parley_channel_api_errors_total names.
var codes = wxapi.NewCodes(
	codeWindowClosed, codeSendLimit,
	45002, // content size out of limit
	40003, // invalid openid
	43004, // the user has not subscribed
	45080, // typing: no interaction in the last 30 s
	45081, // typing: already typing
)

// New builds the adapter; nothing is contacted until Run or the first
// callback. m nil counts into a private registry; log nil discards.
func New(cfg Config, opts Options, m *metrics.Metrics, log *slog.Logger) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("wechat_oa: %w", err)
	}
	if !cfg.defaultEnabled() {
		return nil, errors.New("wechat_oa: app_id, app_secret and token are required")
	}
	if opts.Redis == nil {
		return nil, errors.New("wechat_oa: a Redis client is required (passive replies, access token)")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
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
	crypter, err := wxcrypto.New(cfg.Token.Reveal(), cfg.EncodingAESKey.Reveal(), cfg.AppID)
	if err != nil {
		return nil, fmt.Errorf("wechat_oa: %w", err)
	}
	a := &Adapter{cfg: cfg, opts: opts, log: log, m: m, crypter: crypter, handler: opts.Handler,
		refusals: logthrottle.New(logthrottle.DefaultEvery, opts.Now)}
	a.api = wxapi.NewClient(wxapi.Account{
		Channel: Name, ID: Name + ":" + cfg.AppID, BaseURL: cfg.BaseURL, Codes: codes,
		TokenOp: "token", TokenPath: "/cgi-bin/token",
		TokenQuery: func() url.Values {
			return url.Values{"grant_type": {"client_credential"}, "appid": {cfg.AppID}, "secret": {cfg.AppSecret.Reveal()}}
		},
	}, opts.API, opts.Redis, opts.Prefix, m, log)
	a.api.Tokens.Observe = a.showUp
	a.m.AccountUp.WithLabelValues(Name, a.accountLabel()).Set(0) // until it holds a token
	a.typing = a.api.Retrier.WithAttempts(1)
	a.passive = &passive{client: opts.Redis, prefix: opts.Prefix + Name + ":reply:{" + cfg.AppID + ":",
		wait: opts.PassiveWait, ttl: opts.StateTTL, polling: pollEvery}
	a.replays = wxcrypto.NewReplays(opts.Redis, opts.Prefix+Name+":{"+cfg.AppID+"}:", opts.Window)
	if !crypter.Encrypts() {
		log.Warn("no encoding_aes_key: callbacks are accepted in plaintext mode only, where the signature does not cover the message; use safe mode to authenticate it")
	}
	return a, nil
}

// Name implements channels.Channel.
func (a *Adapter) Name() string { return Name }

// Run implements channels.Runner: it keeps the access token fresh (one
// replica refreshes it, the others read it) until ctx ends, then waits for
// the background work of the callbacks and turns.
func (a *Adapter) Run(ctx context.Context, h channels.Handler) error {
	a.mu.Lock()
	if a.handler == nil {
		a.handler = h
	}
	a.mu.Unlock()
	var keeper sync.WaitGroup
	keeper.Go(func() { a.api.Tokens.Keep(ctx) })
	keeper.Wait()
	a.bg.Stop()
	return nil
}

func (a *Adapter) currentHandler() channels.Handler {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.handler
}
