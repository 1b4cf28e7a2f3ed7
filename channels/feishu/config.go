package feishu

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/retry"
)

// Values of Config.Domain and Config.Mode.
const (
	DomainFeishu  = "feishu"
	DomainLark    = "lark"
	ModeWebhook   = "webhook"   // HTTP callbacks only
	ModeWebsocket = "websocket" // the long connection (and the callback route)
)

// Config is the feishu: section of the configuration file; the FEISHU_*
// environment variables override it. AppID and AppSecret turn Feishu on.
type Config struct {
	AppID             string        `yaml:"app_id"`             // FEISHU_APP_ID
	AppSecret         config.Secret `yaml:"app_secret"`         // FEISHU_APP_SECRET
	VerificationToken config.Secret `yaml:"verification_token"` // FEISHU_VERIFICATION_TOKEN
	EncryptKey        config.Secret `yaml:"encrypt_key"`        // FEISHU_ENCRYPT_KEY
	// BaseURL is the Open API host, also used for the long-connection
	// endpoint ({BaseURL}/callback/ws/endpoint). Empty: by Domain
	// (FEISHU_BASE_URL).
	BaseURL string `yaml:"base_url"`
	// Domain is "feishu" (open.feishu.cn) or "lark" (open.larksuite.com).
	Domain string `yaml:"domain"`
	// Mode "webhook" turns the long connection off; "" and "websocket" run
	// it. The HTTP route is mounted either way (FEISHU_MODE).
	Mode string `yaml:"mode"`
	// ReplyInThread answers a mention in a normal group inside a thread of
	// that message (reply_in_thread), making the thread the conversation.
	ReplyInThread bool `yaml:"reply_in_thread"`
	// FollowThreads continues a thread the bot answered without a new
	// mention (needs the group-message scope).
	FollowThreads bool `yaml:"follow_threads"`
	// StreamEvery is the least time between two updates of a live card
	// while the answer is written (0: DefaultStreamEvery). Each update is
	// an Open API call, and a free tenant's calls are counted by the
	// month: text that arrives sooner waits for the next update or for
	// the answer's end.
	StreamEvery time.Duration `yaml:"stream_every"`
	// Retry shapes the retries of one Open API call: tries, first wait,
	// longest wait.
	Retry retry.Config `yaml:"retry"`
	// Accounts are further Feishu apps served beside the section's own
	// (feishu.accounts.NAME), each with its own credentials, route
	// (/feishu/events/NAME), long connection and bot. The section's own
	// keys are the account named default.
	Accounts map[string]*Account `yaml:"accounts,omitempty"`
}

// defaultRetry is the retry: section's defaults.
var defaultRetry = retry.Config{MaxAttempts: DefaultAttempts, Base: DefaultRetryBase, Max: 8 * DefaultRetryBase}

func init() {
	config.RegisterPlatform(config.Platform{Name: Name, NewConfig: func() config.PlatformConfig { return DefaultConfig() }})
}

var (
	_ config.PlatformConfig = (*Config)(nil)
	_ channels.Opener       = (*Config)(nil)
)

// DefaultConfig returns the section's defaults.
func DefaultConfig() *Config {
	return &Config{Domain: DomainFeishu, ReplyInThread: true, FollowThreads: true, StreamEvery: DefaultStreamEvery, Retry: defaultRetry}
}

// Enabled implements config.PlatformConfig: the app's id or secret turns
// Feishu on (and Validate asks for the other).
func (c *Config) Enabled() bool { return c.defaultEnabled() || len(c.Accounts) > 0 }

// Env implements config.PlatformConfig.
func (c *Config) Env() []config.EnvVar {
	return []config.EnvVar{
		config.Env("FEISHU_APP_ID", &c.AppID),
		config.Env("FEISHU_APP_SECRET", &c.AppSecret),
		config.Env("FEISHU_VERIFICATION_TOKEN", &c.VerificationToken),
		config.Env("FEISHU_ENCRYPT_KEY", &c.EncryptKey),
		config.Env("FEISHU_BASE_URL", &c.BaseURL),
		config.Env("FEISHU_MODE", &c.Mode),
	}
}

// Validate implements config.PlatformConfig.
func (c *Config) Validate() error {
	var errs []error
	switch c.Domain {
	case "", DomainFeishu, DomainLark:
	default:
		errs = append(errs, fmt.Errorf("domain: %q must be feishu or lark", c.Domain))
	}
	switch c.Mode {
	case "", ModeWebhook, ModeWebsocket:
	default:
		errs = append(errs, fmt.Errorf("mode: %q must be webhook or websocket", c.Mode))
	}
	if err := c.Retry.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.StreamEvery < 0 {
		errs = append(errs, fmt.Errorf("stream_every: %s is negative; leave it out for %s", c.StreamEvery, DefaultStreamEvery))
	}
	errs = append(errs, c.validateAccounts())
	if !c.defaultEnabled() {
		return errors.Join(config.FlattenProblems(errs...)...)
	}
	if c.AppID == "" || !c.AppSecret.IsSet() {
		errs = append(errs, errors.New("app_id: set both FEISHU_APP_ID and FEISHU_APP_SECRET (or neither)"))
	}
	if c.Mode == ModeWebhook && !c.VerificationToken.IsSet() && !c.EncryptKey.IsSet() {
		errs = append(errs, errors.New("mode: webhook mode needs verification_token or encrypt_key (FEISHU_VERIFICATION_TOKEN, FEISHU_ENCRYPT_KEY), or callbacks cannot be authenticated"))
	}
	return errors.Join(config.FlattenProblems(errs...)...)
}

// baseURL is the Open API host: BaseURL, else the host of Domain.
func (c Config) baseURL() string {
	if base := strings.TrimRight(c.BaseURL, "/"); base != "" {
		return base
	}
	if c.Domain == DomainLark {
		return LarkBaseURL
	}
	return FeishuBaseURL
}

// Open implements channels.Opener: the adapter, when the app's credentials
// are set. Its HTTP callback is mounted whenever it exists; its long
// connection runs unless Mode is webhook.
func (c *Config) Open(_ context.Context, deps channels.Deps) (channels.Channel, error) {
	if !c.defaultEnabled() {
		return nil, nil
	}
	a, err := c.open(deps, "")
	if err != nil {
		return nil, err
	}
	return a, nil
}

// open builds the adapter of one account (c holds its keys; account is
// "" for the default).
func (c *Config) open(deps channels.Deps, account string) (*Adapter, error) {
	r := c.Retry.Or(defaultRetry)
	a, err := New(*c, Options{
		Attempts: r.MaxAttempts, RetryBase: r.Base, RetryMax: r.Max,
		Handler:   deps.Handler,
		Redis:     deps.Redis,
		Prefix:    deps.Prefix,
		ThreadTTL: deps.HistoryTTL,
		Account:   account,
	}, deps.Metrics, deps.Log)
	if err != nil {
		return nil, err
	}
	return a, nil
}
