// Package wecomapp is the WeCom self-built app channel (企业微信自建应用),
// platform wecom_app: members of an organisation message an app, WeCom
// posts each message encrypted to the app's callback URL, and the app
// answers through the server API.
//
// Each configured app gets the callback path /wecom/app/NAME. A callback is
// verified and decrypted (package wxcrypto) before anything reads it,
// handed to the gateway, and acked at once with an empty passive reply:
// WeCom wants an answer within 5 s and retries three times otherwise. The
// answer goes out with message/send (or appchat/send into a configured
// group chat), as markdown or text, split to WeCom's 2048 bytes. The
// gateway de-duplicates on the MsgId, so a retried callback — on any
// replica — gets one answer. The access token is shared by every replica
// through Redis (package wxapi): one refreshes it at a time.
package wecomapp

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
)

// Name is the platform name in conversation keys, policies and metrics.
const Name = "wecom_app"

// PathPrefix starts every app's callback path: /wecom/app/NAME.
const PathPrefix = "/wecom/app/"

// Options are the parts of an Adapter that the file does not set. Zero
// fields take the defaults; Redis is required.
type Options struct {
	// Handler receives verified messages. When nil, the handler given to
	// Run is used (callbacks are answered 503 until then).
	Handler channels.Handler
	// Redis holds the access tokens and the notes already sent; keys start
	// with Prefix.
	Redis  redis.UniversalClient
	Prefix string
	// Now is the clock of the timestamp check (default time.Now).
	Now func() time.Time
	// Window is how far a callback's timestamp may be from Now (default
	// wxcrypto.DefaultWindow).
	Window time.Duration
	// BodyTimeout bounds the arrival of a callback's body (default
	// wxcrypto.DefaultBodyTimeout).
	BodyTimeout time.Duration
	// SubmitTimeout bounds the hand-over to the gateway before the ack
	// (default 3 s: WeCom waits 5).
	SubmitTimeout time.Duration
	// API shapes the calls to the server API and the shared token.
	API wxapi.ClientOptions
}

// DefaultSubmitTimeout is the default of Options.SubmitTimeout.
const DefaultSubmitTimeout = 3 * time.Second

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
	return o
}

// Adapter is the WeCom app channel: every configured app.
type Adapter struct {
	opts Options
	log  *slog.Logger
	m    *metrics.Metrics
	apps map[string]*app // by name

	mu      sync.Mutex
	handler channels.Handler

	// refusals keeps refused callbacks from flooding the log.
	refusals *logthrottle.Throttle
}

// app is one configured app with its crypto and API client.
type app struct {
	cfg     App
	crypter *wxcrypto.Crypter
	api     *wxapi.Client
	log     *slog.Logger
	// replays refuses a signed query seen before with another body.
	replays *wxcrypto.Replays
}

var (
	_ channels.Channel     = (*Adapter)(nil)
	_ channels.Runner      = (*Adapter)(nil)
	_ channels.HTTPChannel = (*Adapter)(nil)
)

// codes are the WeCom errcodes parley_channel_api_errors_total names.
var codes = wxapi.NewCodes(
	40056, // invalid agentid
	60011, // no privilege: the member is outside the app's visible range
	81013, // the member (touser) does not exist or is not visible
	86003, // appchat: the group chat does not exist (or the app did not create it)
	45002, // content size out of limit
)

// New builds the adapter; nothing is contacted until Run or the first
// callback. m nil counts into a private registry; log nil discards.
func New(cfg Config, opts Options, m *metrics.Metrics, log *slog.Logger) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("wecom_app: %w", err)
	}
	if len(cfg.Apps) == 0 {
		return nil, errors.New("wecom_app: no app is configured")
	}
	if opts.Redis == nil {
		return nil, errors.New("wecom_app: a Redis client is required (access tokens)")
	}
	opts = opts.withDefaults()
	if m == nil {
		m = metrics.New()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", Name)
	a := &Adapter{opts: opts, log: log, m: m, apps: map[string]*app{}, handler: opts.Handler,
		refusals: logthrottle.New(logthrottle.DefaultEvery, opts.Now)}
	for _, c := range cfg.Apps {
		ap, err := a.newApp(c.withDefaults())
		if err != nil {
			return nil, err
		}
		a.apps[c.Name] = ap
	}
	return a, nil
}

func (a *Adapter) newApp(c App) (*app, error) {
	crypter, err := wxcrypto.New(c.Token.Reveal(), c.EncodingAESKey.Reveal(), c.CorpID)
	if err != nil {
		return nil, fmt.Errorf("wecom_app: apps %s: %w", c.Name, err)
	}
	log := a.log.With("app", c.Name)
	api := wxapi.NewClient(wxapi.Account{
		Channel: Name, BaseURL: c.BaseURL, Codes: codes,
		// One token per app: an app's Secret yields its own token.
		ID:      fmt.Sprintf("%s:%s:%d", Name, c.CorpID, c.AgentID),
		TokenOp: "gettoken", TokenPath: "/cgi-bin/gettoken",
		TokenQuery: func() url.Values { return url.Values{"corpid": {c.CorpID}, "corpsecret": {c.Secret.Reveal()}} },
	}, a.opts.API, a.opts.Redis, a.opts.Prefix, a.m, log)
	ap := &app{cfg: c, crypter: crypter, api: api, log: log,
		replays: wxcrypto.NewReplays(a.opts.Redis, a.opts.Prefix+Name+":{"+c.Name+"}:", a.opts.Window)}
	return ap, nil
}

// Name implements channels.Channel.
func (a *Adapter) Name() string { return Name }

// Run implements channels.Runner: it keeps every app's access token fresh
// (one replica refreshes it, the others read it) until ctx ends, then
// waits for the background work of the callbacks.
func (a *Adapter) Run(ctx context.Context, h channels.Handler) error {
	a.mu.Lock()
	if a.handler == nil {
		a.handler = h
	}
	a.mu.Unlock()
	var wg sync.WaitGroup
	for _, ap := range a.apps {
		wg.Go(func() { ap.api.Tokens.Keep(ctx) })
	}
	wg.Wait()
	return nil
}

func (a *Adapter) currentHandler() channels.Handler {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.handler
}
