package wechat

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/retry"
)

// DefaultChunkChars is the size of one message of a split iLink answer.
const DefaultChunkChars = 600

// Config is the wechat: section of the configuration file;
// WECHAT_ILINK_BASE_URL and the WECOM_* environment variables override it.
// WeComBotID and WeComSecret turn the WeCom AI bot on; personal-WeChat
// bots are turned on by `parley wechat login`, which the file does not
// show.
type Config struct {
	// ILinkBaseURL is used for an account stored without a base URL
	// (WECHAT_ILINK_BASE_URL).
	ILinkBaseURL string        `yaml:"ilink_base_url"`
	ILinkCDNURL  string        `yaml:"ilink_cdn_url"`    // WECHAT_ILINK_CDN_URL: where iLink images are downloaded
	WeComBotID   string        `yaml:"wecom_bot_id"`     // WECOM_BOT_ID; empty turns WeCom off
	WeComSecret  config.Secret `yaml:"wecom_bot_secret"` // WECOM_BOT_SECRET
	WeComWSURL   string        `yaml:"wecom_ws_url"`     // WECOM_WS_URL
	// WeComMediaHosts are further scheme://host[:port] that WeCom image
	// and file addresses may name besides WeCom's own media bucket (a
	// proxy in front of it).
	WeComMediaHosts []string `yaml:"wecom_media_hosts"`
	// ChunkChars is the size of one message of a split answer, in
	// characters; phones read short messages better than one wall of text.
	ChunkChars int `yaml:"chunk_chars"`
	// Retry shapes the tries of one iLink send (max_attempts) and the
	// backoff after a failed poll or a dropped WeCom connection, which
	// iLink sends wait on too (base, max).
	Retry retry.Config `yaml:"retry"`
	// Accounts are further WeChat apps served beside the section's own
	// (wechat.accounts.NAME), each with its own WeCom AI bot, iLink
	// logins and leases. The section's own keys are the account named
	// default.
	Accounts map[string]*AccountConfig `yaml:"accounts,omitempty"`
}

// defaultRetry is the retry: section's defaults.
var defaultRetry = retry.Config{MaxAttempts: DefaultSendAttempts, Base: DefaultRetryMin, Max: DefaultRetryMax}

// builtinPolicy is WeChat's builtin policy level. WeChat is a consumer
// channel where anyone can message the bot, so tools that write are off
// unless an operator turns them back on for wechat itself; the level sits
// above the global default, so a global "write: true" written with Slack
// in mind does not reopen WeChat.
var builtinPolicy = config.Level{Tools: config.ToolRules{Write: new(false)}}

// BuiltinPolicy returns a copy of WeChat's builtin policy level, for the
// other WeChat-family platforms (WeCom apps, Official Accounts) to register
// as theirs: they are as open to anyone as WeChat is.
func BuiltinPolicy() *config.Level {
	l := builtinPolicy
	return &l
}

func init() {
	config.RegisterPlatform(config.Platform{
		Name:      Name,
		NewConfig: func() config.PlatformConfig { return DefaultConfig() },
		Policy:    &builtinPolicy,
	})
}

var (
	_ config.PlatformConfig = (*Config)(nil)
	_ channels.Opener       = (*Config)(nil)
)

// DefaultConfig returns the section's defaults.
func DefaultConfig() *Config {
	return &Config{ILinkBaseURL: DefaultILinkBaseURL, ILinkCDNURL: DefaultILinkCDNURL, WeComWSURL: DefaultWeComWSURL, ChunkChars: DefaultChunkChars, Retry: defaultRetry}
}

// FromConfig returns c's wechat: section (the defaults when c has none).
func FromConfig(c config.Config) *Config {
	if s, ok := config.Section[*Config](c, Name); ok {
		return s
	}
	return DefaultConfig()
}

// withDefaults fills what a Config built in code leaves empty.
func (c Config) withDefaults() Config {
	if c.ILinkBaseURL == "" {
		c.ILinkBaseURL = DefaultILinkBaseURL
	}
	if c.WeComWSURL == "" {
		c.WeComWSURL = DefaultWeComWSURL
	}
	if c.ILinkCDNURL == "" {
		c.ILinkCDNURL = DefaultILinkCDNURL
	}
	if c.ChunkChars <= 0 {
		c.ChunkChars = DefaultChunkChars
	}
	c.Retry = c.Retry.Or(defaultRetry)
	return c
}

// Enabled implements config.PlatformConfig: the WeCom AI bot's id or
// secret, or an account. (Open also starts the channel for logged-in
// iLink bots.)
func (c *Config) Enabled() bool { return c.wecomEnabled() || len(c.Accounts) > 0 }

// wecomEnabled reports whether the keys configure a WeCom AI bot.
func (c *Config) wecomEnabled() bool { return c.WeComBotID != "" || c.WeComSecret.IsSet() }

// Env implements config.PlatformConfig.
// An account's secret has no variable of its own: it may be written
// "${NAME}" (config.EnvRefs).
func (c *Config) Env() []config.EnvVar {
	vars := []config.EnvVar{
		config.Env("WECHAT_ILINK_BASE_URL", &c.ILinkBaseURL),
		config.Env("WECHAT_ILINK_CDN_URL", &c.ILinkCDNURL),
		config.Env("WECOM_BOT_ID", &c.WeComBotID),
		config.Env("WECOM_BOT_SECRET", &c.WeComSecret),
		config.Env("WECOM_WS_URL", &c.WeComWSURL),
	}
	for _, name := range slices.Sorted(maps.Keys(c.Accounts)) {
		if acc := c.Accounts[name]; acc != nil {
			vars = append(vars, config.EnvRefs(&acc.WeComSecret)...)
		}
	}
	return vars
}

// Validate implements config.PlatformConfig: the section's own keys, and
// each account's (see validateAccounts).
func (c *Config) Validate() error {
	return errors.Join(config.FlattenProblems(c.validateOwn(), c.validateAccounts())...)
}

// validateOwn checks one app's keys.
func (c *Config) validateOwn() error {
	var errs []error
	if c.ChunkChars <= 0 {
		errs = append(errs, fmt.Errorf("chunk_chars: must be greater than 0, got %d", c.ChunkChars))
	}
	for _, h := range c.WeComMediaHosts {
		if u, err := url.Parse(h); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
			errs = append(errs, fmt.Errorf("wecom_media_hosts: %q is not scheme://host[:port]", h))
		}
	}
	if err := c.Retry.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := config.UnresolvedEnvRef(c.WeComSecret); err != nil {
		errs = append(errs, fmt.Errorf("wecom_bot_secret: %w", err))
	}
	if c.wecomEnabled() && (c.WeComBotID == "" || !c.WeComSecret.IsSet()) {
		errs = append(errs, errors.New("wecom_bot_id: set both WECOM_BOT_ID and WECOM_BOT_SECRET (or neither)"))
	}
	return errors.Join(errs...)
}

// stateTimeout bounds the start-up read of the iLink logins.
const stateTimeout = 10 * time.Second

// Open implements channels.Opener: the adapter, when an iLink bot is
// logged in (`parley wechat login`) or the WeCom AI bot is configured.
// iLink logins and cursors live in Redis when it is shared, else in
// $PARLEY_HOME/wechat.json.
func (c *Config) Open(ctx context.Context, deps channels.Deps) (channels.Channel, error) {
	a, err := c.open(ctx, deps, "")
	if a == nil || err != nil {
		return nil, err
	}
	return a, nil
}

// openState is where an account's iLink logins are kept ("" or default:
// the section's own): Redis when it is shared, else a file under home.
func openState(deps channels.Deps, account string) State {
	if deps.Shared {
		return NewRedisState(deps.Redis, StatePrefix(deps.Prefix, account))
	}
	return NewAccountFileState(deps.Home, account)
}

// open builds the adapter of one account (c holds its keys; account is ""
// for the default). The default is opened when it has a login or a WeCom
// bot (else none); another account always, watching for its iLink logins,
// since the file naming it says it is wanted: a `parley wechat login
// --account` is picked up without a restart.
func (c *Config) open(ctx context.Context, deps channels.Deps, account string) (*Adapter, error) {
	state := openState(deps, account)
	ctx, cancel := context.WithTimeout(ctx, stateTimeout)
	defer cancel()
	accounts, err := state.Accounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("wechat: %w", err)
	}
	if len(accounts) == 0 && !c.wecomEnabled() && account == "" {
		return nil, nil
	}
	r := c.Retry.Or(defaultRetry)
	opts := Options{
		SendAttempts: r.MaxAttempts, RetryMin: r.Base, RetryMax: r.Max,
		// Leases, context tokens and the WeCom reply queue: the shared
		// Redis, or the embedded one of a single in-memory replica.
		Client:  deps.Redis,
		Prefix:  StatePrefix(deps.Prefix, account),
		Account: account,
	}
	if len(accounts) > 0 || account != "" {
		opts.State = state
	}
	a, err := New(*c, opts, deps.Metrics, deps.Log)
	if err != nil {
		return nil, err
	}
	for _, acct := range accounts {
		if acct.Expired {
			a.log.Warn("the iLink session of this bot expired; run `"+a.loginCommand()+"` to log in again", "bot", acct.BotID)
		}
	}
	return a, nil
}
