// Package wechat is the WeChat channel: personal WeChat through the iLink
// bot protocol (a QR login, then a long poll of getupdates and sendmessage
// replies) and WeCom AI bots through their long connection (a WebSocket
// that delivers aibot_msg_callback and takes aibot_respond_msg stream
// frames). Neither needs a public URL.
//
// Both arrive as one channel named "wechat". A conversation is one user
// (or, for a message with a group_id, one group) of one iLink bot, or one
// WeCom chat (chatid in groups, the user in single chats). Message.Meta["via"] says which transport a message came by, and
// Send answers by the same one.
//
// Several replicas may run: a Redis lease per bot makes exactly one of them
// poll an iLink bot or hold a WeCom connection (see lease.go). Any replica
// can answer: iLink replies are plain HTTPS calls with the newest
// context_token kept in Redis, and WeCom replies made on a replica without
// the connection go through a Redis queue that the holder drains.
package wechat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/outbound"
	"github.com/redis/go-redis/v9"
)

// Name is the platform name in conversation keys, policies and metrics.
const Name = "wechat"

// Transports, the value of Message.Meta["via"].
const (
	ViaILink = "ilink"
	ViaWeCom = "wecom"
)

// Options are the parts of an Adapter that the file does not set: where
// it keeps state, and the timings tests shorten. Zero fields take the
// defaults.
type Options struct {
	// Client holds leases, context tokens and the WeCom reply queue: the
	// shared Redis, or the embedded one of a single replica. Required.
	Client redis.UniversalClient
	Prefix string // Redis key prefix (the account's: StatePrefix)
	// Account is the account (wechat.accounts.NAME) the adapter serves,
	// "" for the section's own; its messages carry it (Message.Account).
	Account string
	// State holds iLink accounts and cursors; nil turns iLink off.
	State State
	// HTTP makes the iLink calls; default a plain client.
	HTTP *http.Client
	// MediaHTTP downloads images and files (WeCom's media bucket, iLink's
	// CDN); default a pooled outbound client. Which hosts it may reach is
	// FetchAttachment's allow-list, not the client's.
	MediaHTTP *http.Client
	// MediaHosts are further scheme://host[:port] a WeCom media address
	// may name besides WeCom's own media bucket (tests).
	MediaHosts []string

	// LeaseTTL bounds how long a dead holder keeps a bot; default 15s.
	LeaseTTL time.Duration
	// AccountRefresh is how often the stored iLink accounts are re-read
	// (new logins, re-logins after an expiry); default 10s.
	AccountRefresh time.Duration
	// RetryMin and RetryMax bound the backoff after a failed poll or a
	// dropped connection, and between the tries of an iLink send; default
	// 1s and 30s.
	RetryMin, RetryMax time.Duration
	// SendAttempts bounds the tries of one iLink sendmessage; default 3.
	SendAttempts int
	// PingInterval is the WeCom heartbeat; default 30s.
	PingInterval time.Duration
	// AckTimeout bounds the wait for WeCom's answer to a frame; default 5s.
	AckTimeout time.Duration
	// ReqIDTTL is how long a WeCom req_id can still be answered with
	// aibot_respond_msg; older ones fall back to aibot_send_msg. Default 5m.
	ReqIDTTL time.Duration
	// TypingInterval repeats the iLink typing indicator; default 5s.
	TypingInterval time.Duration
}

// Defaults of Options.
const (
	DefaultLeaseTTL       = 15 * time.Second
	DefaultAccountRefresh = 10 * time.Second
	DefaultRetryMin       = time.Second
	DefaultRetryMax       = 30 * time.Second
	DefaultSendAttempts   = 3
	DefaultPingInterval   = 30 * time.Second
	DefaultAckTimeout     = 5 * time.Second
	DefaultReqIDTTL       = 5 * time.Minute
	DefaultTypingInterval = 5 * time.Second
)

func (o Options) withDefaults() Options {
	if o.HTTP == nil {
		o.HTTP = outbound.Client(outbound.Options{}) // long polls: their contexts bound them
	}
	if o.MediaHTTP == nil {
		o.MediaHTTP = defaultMediaClient()
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.AccountRefresh <= 0 {
		o.AccountRefresh = DefaultAccountRefresh
	}
	if o.RetryMin <= 0 {
		o.RetryMin = DefaultRetryMin
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(DefaultRetryMax, o.RetryMin)
	}
	if o.SendAttempts <= 0 {
		o.SendAttempts = DefaultSendAttempts
	}
	if o.PingInterval <= 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = DefaultAckTimeout
	}
	if o.ReqIDTTL <= 0 {
		o.ReqIDTTL = DefaultReqIDTTL
	}
	if o.TypingInterval <= 0 {
		o.TypingInterval = DefaultTypingInterval
	}
	return o
}

// Adapter is the WeChat channel.
type Adapter struct {
	cfg   Config
	opts  Options
	log   *slog.Logger
	m     *metrics.Metrics
	ilink *ilinkSide // nil when iLink is off
	wecom *wecomSide // nil when WeCom is off

	mu     sync.Mutex
	runCtx context.Context // set while Run runs; typing goroutines end with it
	up     map[string]bool // transports/bots with a live poll or connection here
}

var (
	_ channels.Channel = (*Adapter)(nil)
	_ channels.Runner  = (*Adapter)(nil)
	_ channels.Typing  = (*Adapter)(nil)
	_ channels.Health  = (*Adapter)(nil)
)

// New returns the adapter. It needs a Redis client, and iLink state or
// WeCom credentials (or both). m nil counts into a private registry; log
// nil discards.
func New(cfg Config, opts Options, m *metrics.Metrics, log *slog.Logger) (*Adapter, error) {
	cfg, opts = cfg.withDefaults(), opts.withDefaults()
	if opts.Client == nil {
		return nil, errors.New("wechat: a Redis client is required (leases, context tokens)")
	}
	if cfg.WeComBotID != "" && !cfg.WeComSecret.IsSet() {
		return nil, errors.New("wechat: WECOM_BOT_SECRET is required with WECOM_BOT_ID")
	}
	if opts.State == nil && cfg.WeComBotID == "" {
		return nil, errors.New("wechat: neither iLink state nor a WeCom bot is configured")
	}
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
	a := &Adapter{cfg: cfg, opts: opts, log: log, m: m, up: map[string]bool{}}
	if opts.State != nil {
		a.ilink = newILinkSide(a)
	}
	if cfg.WeComBotID != "" {
		a.wecom = newWeComSide(a)
	}
	a.m.AccountUp.WithLabelValues(Name, a.accountLabel()).Set(0) // until a poll or connection is up
	return a, nil
}

// Name implements channels.Channel.
func (a *Adapter) Name() string { return Name }

// Run implements channels.Runner: it polls the iLink accounts and holds the
// WeCom connection this replica wins the lease for, until ctx ends.
func (a *Adapter) Run(ctx context.Context, h channels.Handler) error {
	a.mu.Lock()
	a.runCtx = ctx
	a.mu.Unlock()
	var wg sync.WaitGroup
	if a.ilink != nil {
		wg.Go(func() { a.ilink.run(ctx, h) })
	}
	if a.wecom != nil {
		wg.Go(func() { a.wecom.run(ctx, h) })
	}
	wg.Wait()
	a.showConnected(false)
	a.m.AccountUp.WithLabelValues(Name, a.accountLabel()).Set(0)
	return nil
}

// Send implements channels.Channel.
func (a *Adapter) Send(ctx context.Context, m channels.Message, r channels.Reply) error {
	switch m.Meta["via"] {
	case ViaILink:
		if a.ilink == nil {
			return errors.New("wechat: iLink is not configured on this replica")
		}
		return a.ilink.send(ctx, m, r.Text)
	case ViaWeCom:
		if a.wecom == nil {
			return errors.New("wechat: WeCom is not configured on this replica")
		}
		return a.wecom.reply(ctx, m, r)
	default:
		return fmt.Errorf("wechat: message has no known transport (meta via=%q)", m.Meta["via"])
	}
}

// StartTyping implements channels.Typing: the iLink typing indicator, or a
// first WeCom stream frame, while a turn runs.
func (a *Adapter) StartTyping(ctx context.Context, m channels.Message) func() {
	switch {
	case m.Meta["via"] == ViaILink && a.ilink != nil:
		return a.ilink.startTyping(ctx, m)
	case m.Meta["via"] == ViaWeCom && a.wecom != nil:
		a.wecom.typing(ctx, m)
	}
	return func() {}
}

// Ready implements channels.Health: degraded while an iLink session is
// expired (errcode -14) or while this replica holds the WeCom lease but
// its connection is down.
func (a *Adapter) Ready() error {
	var problems []string
	if a.ilink != nil {
		for _, bot := range a.ilink.expiredBots() {
			problems = append(problems, fmt.Sprintf("iLink bot %s: session expired (errcode -14); run `%s` again", bot, a.loginCommand()))
		}
	}
	if a.wecom != nil {
		if err := a.wecom.ready(); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// loginCommand is the command that logs one of the account's iLink bots
// in.
func (a *Adapter) loginCommand() string {
	if a.opts.Account != "" {
		return "parley wechat login --account " + a.opts.Account
	}
	return "parley wechat login"
}

// runContext is the context of Run (nil before Run): background work of a
// turn, such as a typing indicator, ends with it too.
func (a *Adapter) runContext() context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runCtx
}

// setUp records whether one poll or connection is live on this replica and
// updates parley_channel_connected{channel="wechat"} (the default
// account's: 1 while any is) and parley_account_up.
func (a *Adapter) setUp(key string, up bool) {
	a.mu.Lock()
	if up {
		a.up[key] = true
	} else {
		delete(a.up, key)
	}
	n := len(a.up)
	a.mu.Unlock()
	a.showConnected(n > 0)
	a.showUp()
}

// showConnected sets parley_channel_connected, which stays the default
// account's (as Slack's does): another account shows in
// parley_account_up.
func (a *Adapter) showConnected(up bool) {
	if a.opts.Account != "" {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	a.m.ChannelConnected.WithLabelValues(Name).Set(v)
}

// showUp sets parley_account_up{channel="wechat",account}: 1 while the
// account serves from this replica (a live WeCom connection or iLink
// poll here, or a lease another replica holds) and nothing of it is
// refused or expired (Ready would say what).
func (a *Adapter) showUp() {
	a.mu.Lock()
	live := len(a.up) > 0
	a.mu.Unlock()
	up := live
	if a.wecom != nil {
		up = up || a.wecom.heldElsewhere()
	}
	if a.ilink != nil {
		up = up || a.ilink.heldElsewhere()
	}
	if a.Ready() != nil {
		up = false
	}
	v := 0.0
	if up {
		v = 1
	}
	a.m.AccountUp.WithLabelValues(Name, a.accountLabel()).Set(v)
}

func (a *Adapter) reject(reason string) {
	a.m.MessagesRejected.WithLabelValues(Name, reason).Inc()
}

func (a *Adapter) apiError(code string) {
	a.m.ChannelAPIErrors.WithLabelValues(Name, code).Inc()
}

// PostsFor implements channels.PosterFor: an iLink answer is delivered
// part by part through the gateway's outbox, so a part that failed is
// tried again, by any replica, and none is sent twice; a WeCom AI-bot
// answer finishes the stream its question opened, which only Send does.
func (a *Adapter) PostsFor(m channels.Message) bool { return m.Meta["via"] == ViaILink }

// Parts implements channels.Poster: the phone-sized chunks Send makes of
// an iLink answer.
func (a *Adapter) Parts(m channels.Message, r channels.Reply) []string {
	return splitChars(channels.PlainText(r.Text), a.cfg.ChunkChars)
}

// Post implements channels.Poster for iLink answers (see PostsFor).
func (a *Adapter) Post(ctx context.Context, m channels.Message, part string) (string, error) {
	switch {
	case m.Meta["via"] != ViaILink:
		return "", &channels.PostError{Err: fmt.Errorf("wechat: only iLink answers are posted part by part (meta via=%q)", m.Meta["via"])}
	case a.ilink == nil:
		// Another replica may have iLink configured.
		return "", &channels.PostError{Retry: true, Err: errors.New("wechat: iLink is not configured on this replica")}
	}
	return a.ilink.post(ctx, m, part)
}

// Pace implements channels.Poster. iLink publishes no rate; a personal
// account that bursts risks being limited, so a chat gets a few parts at
// once and then one a second, across every replica.
func (a *Adapter) Pace() channels.Pace { return channels.Pace{Every: time.Second, Burst: 4} }

// Posts implements channels.PostCounter: how many messages Send makes of
// text for m (a WeCom answer's streamed first part counts as one).
func (a *Adapter) Posts(m channels.Message, text string) int {
	switch m.Meta["via"] {
	case ViaWeCom:
		parts := channels.Split(text, streamLimit)
		n := min(len(parts), 1)
		for _, p := range parts[n:] {
			n += len(channels.Split(p, pushLimit))
		}
		return n
	default:
		return len(splitChars(channels.PlainText(text), a.cfg.ChunkChars))
	}
}
