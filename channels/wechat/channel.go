// Package wechat is the WeChat channel: personal WeChat through the iLink
// bot protocol (a QR login, then a long poll of getupdates and sendmessage
// replies) and WeCom AI bots through their long connection (a WebSocket
// that delivers aibot_msg_callback and takes aibot_respond_msg stream
// frames). Neither needs a public URL.
//
// Both arrive as one channel named "wechat". A conversation is one user of
// one iLink bot, or one WeCom chat (chatid in groups, the user in single
// chats). Message.Meta["via"] says which transport a message came by, and
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
	"github.com/redis/go-redis/v9"
)

// Name is the platform name in conversation keys, policies and metrics.
const Name = "wechat"

// Transports, the value of Message.Meta["via"].
const (
	ViaILink = "ilink"
	ViaWeCom = "wecom"
)

// Config is everything the channel needs. Zero tunables take defaults.
type Config struct {
	// Client holds leases, context tokens and the WeCom reply queue: the
	// shared Redis, or the embedded one of a single replica.
	Client redis.UniversalClient
	Prefix string // Redis key prefix
	// State holds iLink accounts and cursors; nil turns iLink off.
	State State
	// ILinkBaseURL is used for an account stored without a base URL.
	ILinkBaseURL string

	WeComBotID  string // empty turns WeCom off
	WeComSecret string
	WeComWSURL  string

	// ChunkChars is the size of one message of a split iLink answer, in
	// characters; default 600.
	ChunkChars int

	HTTP    *http.Client // iLink calls; default a plain client
	Metrics *metrics.Metrics
	Log     *slog.Logger

	// LeaseTTL bounds how long a dead holder keeps a bot; default 15s.
	LeaseTTL time.Duration
	// AccountRefresh is how often the stored iLink accounts are re-read
	// (new logins, re-logins after an expiry); default 10s.
	AccountRefresh time.Duration
	// RetryMin and RetryMax bound the backoff after a failed poll or a
	// dropped connection; default 1s and 30s.
	RetryMin, RetryMax time.Duration
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

func (c *Config) defaults() {
	if c.ILinkBaseURL == "" {
		c.ILinkBaseURL = DefaultILinkBaseURL
	}
	if c.WeComWSURL == "" {
		c.WeComWSURL = DefaultWeComWSURL
	}
	if c.ChunkChars <= 0 {
		c.ChunkChars = 600
	}
	if c.HTTP == nil {
		c.HTTP = &http.Client{}
	}
	if c.Metrics == nil {
		c.Metrics = metrics.New()
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 15 * time.Second
	}
	if c.AccountRefresh <= 0 {
		c.AccountRefresh = 10 * time.Second
	}
	if c.RetryMin <= 0 {
		c.RetryMin = time.Second
	}
	if c.RetryMax < c.RetryMin {
		c.RetryMax = max(30*time.Second, c.RetryMin)
	}
	if c.PingInterval <= 0 {
		c.PingInterval = 30 * time.Second
	}
	if c.AckTimeout <= 0 {
		c.AckTimeout = 5 * time.Second
	}
	if c.ReqIDTTL <= 0 {
		c.ReqIDTTL = 5 * time.Minute
	}
	if c.TypingInterval <= 0 {
		c.TypingInterval = 5 * time.Second
	}
}

// Channel is the WeChat adapter. It implements channels.Channel, Runner,
// Typing and Health.
type Channel struct {
	cfg   Config
	log   *slog.Logger
	m     *metrics.Metrics
	ilink *ilinkSide // nil when iLink is off
	wecom *wecomSide // nil when WeCom is off

	mu     sync.Mutex
	runCtx context.Context // set while Run runs; typing goroutines end with it
	up     map[string]bool // transports/bots with a live poll or connection here
}

// New returns the channel. It needs a Redis client, and iLink state or
// WeCom credentials (or both).
func New(cfg Config) (*Channel, error) {
	cfg.defaults()
	if cfg.Client == nil {
		return nil, errors.New("wechat: a Redis client is required (leases, context tokens)")
	}
	if cfg.WeComBotID != "" && cfg.WeComSecret == "" {
		return nil, errors.New("wechat: WECOM_BOT_SECRET is required with WECOM_BOT_ID")
	}
	if cfg.State == nil && cfg.WeComBotID == "" {
		return nil, errors.New("wechat: neither iLink state nor a WeCom bot is configured")
	}
	c := &Channel{cfg: cfg, log: cfg.Log, m: cfg.Metrics, up: map[string]bool{}}
	if cfg.State != nil {
		c.ilink = newILinkSide(c)
	}
	if cfg.WeComBotID != "" {
		c.wecom = newWeComSide(c)
	}
	return c, nil
}

// Name implements channels.Channel.
func (c *Channel) Name() string { return Name }

// Run implements channels.Runner: it polls the iLink accounts and holds the
// WeCom connection this replica wins the lease for, until ctx ends. Every
// goroutine it starts has returned when it returns.
func (c *Channel) Run(ctx context.Context, h channels.Handler) error {
	c.mu.Lock()
	c.runCtx = ctx
	c.mu.Unlock()
	var wg sync.WaitGroup
	if c.ilink != nil {
		wg.Go(func() { c.ilink.run(ctx, h) })
	}
	if c.wecom != nil {
		wg.Go(func() { c.wecom.run(ctx, h) })
	}
	wg.Wait()
	c.m.ChannelConnected.WithLabelValues(Name).Set(0)
	return ctx.Err()
}

// Send implements channels.Channel.
func (c *Channel) Send(ctx context.Context, m channels.Message, r channels.Reply) error {
	switch m.Meta["via"] {
	case ViaILink:
		if c.ilink == nil {
			return errors.New("wechat: iLink is not configured on this replica")
		}
		return c.ilink.send(ctx, m, r.Text)
	case ViaWeCom:
		if c.wecom == nil {
			return errors.New("wechat: WeCom is not configured on this replica")
		}
		return c.wecom.send(ctx, m, r.Text)
	default:
		return fmt.Errorf("wechat: message has no known transport (meta via=%q)", m.Meta["via"])
	}
}

// StartTyping implements channels.Typing: the iLink typing indicator, or a
// first WeCom stream frame, while a turn runs.
func (c *Channel) StartTyping(ctx context.Context, m channels.Message) func() {
	switch {
	case m.Meta["via"] == ViaILink && c.ilink != nil:
		return c.ilink.startTyping(ctx, m)
	case m.Meta["via"] == ViaWeCom && c.wecom != nil:
		c.wecom.typing(ctx, m)
	}
	return func() {}
}

// Ready implements channels.Health: degraded while an iLink session is
// expired (errcode -14) or while this replica holds the WeCom lease but
// its connection is down.
func (c *Channel) Ready() error {
	var problems []string
	if c.ilink != nil {
		for _, bot := range c.ilink.expiredBots() {
			problems = append(problems, fmt.Sprintf("iLink bot %s: session expired (errcode -14); run `parley wechat login` again", bot))
		}
	}
	if c.wecom != nil {
		if err := c.wecom.ready(); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// runContext is the context of Run (nil before Run): background work of a
// turn, such as a typing indicator, ends with it too.
func (c *Channel) runContext() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runCtx
}

// setUp records whether one poll or connection is live on this replica and
// updates parley_channel_connected{channel="wechat"}: 1 while any is.
func (c *Channel) setUp(key string, up bool) {
	c.mu.Lock()
	if up {
		c.up[key] = true
	} else {
		delete(c.up, key)
	}
	n := len(c.up)
	c.mu.Unlock()
	v := 0.0
	if n > 0 {
		v = 1
	}
	c.m.ChannelConnected.WithLabelValues(Name).Set(v)
}

func (c *Channel) reject(reason string) {
	c.m.MessagesRejected.WithLabelValues(Name, reason).Inc()
}

func (c *Channel) apiError(code string) {
	c.m.ChannelAPIErrors.WithLabelValues(Name, code).Inc()
}
