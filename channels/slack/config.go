package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/outbound"
	"github.com/parleyhq/parley/retry"
)

// Defaults of the slack: section.
const (
	// DefaultAPIURL is Slack's Web API.
	DefaultAPIURL = "https://slack.com/api/"
	// DefaultCommand is the slash command the app registers.
	DefaultCommand = "/parley"
)

// Config is the slack: section of the configuration file; the SLACK_*
// environment variables override it. Any credential turns Slack on; then
// BotToken is required, SigningSecret turns on the HTTP routes and
// AppToken Socket Mode (at least one of the two).
type Config struct {
	BotToken      config.Secret `yaml:"bot_token"`      // xoxb-…, for the Web API (SLACK_BOT_TOKEN)
	SigningSecret config.Secret `yaml:"signing_secret"` // verifies HTTP requests (SLACK_SIGNING_SECRET)
	AppToken      config.Secret `yaml:"app_token"`      // xapp-…, for Socket Mode (SLACK_APP_TOKEN)
	APIURL        string        `yaml:"api_url"`        // SLACK_API_URL
	// FollowThreads continues a thread the bot answered without a new
	// mention (needs the channels:history / groups:history scopes).
	FollowThreads bool `yaml:"follow_threads"`
	// Command is the registered slash command, e.g. /parley.
	Command string `yaml:"command"`
	// AllowMentions keeps the user, channel and group mentions and the
	// broadcasts (<!here>, <!channel>, <!everyone>) the model writes in
	// its answers. Off by default: a prompt-injected model could otherwise
	// page a whole workspace.
	AllowMentions bool `yaml:"allow_mentions"`
	// PostEvery is the pace of posts into one channel, shared by every
	// replica (0: a second, Slack's published rate). A Slack-compatible
	// API or proxy with other limits, or a test that posts many answers
	// into one channel, sets its own.
	PostEvery time.Duration `yaml:"post_every"`
	// PostBurst is how many posts a channel that has been quiet takes at
	// once before the pace applies (0: DefaultPostBurst). Slack allows
	// short bursts, so a thread's quick follow-up is not held a second
	// while a sustained flood still averages one post every PostEvery.
	PostBurst int `yaml:"post_burst"`
	// Retry shapes the retries of one Web API call (chat.postMessage, …):
	// tries, first wait, longest wait. A 429 waits its Retry-After.
	Retry retry.Config `yaml:"retry"`
	// Accounts are further Slack apps served beside the section's own
	// (slack.accounts.NAME), each with its own credentials, routes
	// (/slack/events/NAME, …), Socket Mode connection and bot user. The
	// section's own keys are the account named default.
	Accounts map[string]*Account `yaml:"accounts,omitempty"`
}

// defaultRetry is the retry: section's defaults.
var defaultRetry = retry.Config{MaxAttempts: DefaultMaxAttempts, Base: DefaultRetryWait, Max: 8 * DefaultRetryWait}

func init() {
	config.RegisterPlatform(config.Platform{Name: Name, NewConfig: func() config.PlatformConfig { return DefaultConfig() }})
}

var (
	_ config.PlatformConfig = (*Config)(nil)
	_ channels.Opener       = (*Config)(nil)
)

// DefaultConfig returns the section's defaults.
func DefaultConfig() *Config {
	return &Config{APIURL: DefaultAPIURL, FollowThreads: true, Command: DefaultCommand, PostEvery: time.Second / PostsPerSecond, PostBurst: DefaultPostBurst, Retry: defaultRetry}
}

// withDefaults fills what a Config built in code leaves empty.
func (c Config) withDefaults() Config {
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
	}
	if !strings.HasSuffix(c.APIURL, "/") {
		c.APIURL += "/"
	}
	if c.Command == "" {
		c.Command = DefaultCommand
	}
	if c.PostEvery <= 0 {
		c.PostEvery = time.Second / PostsPerSecond
	}
	if c.PostBurst <= 0 {
		c.PostBurst = DefaultPostBurst
	}
	c.Retry = c.Retry.Or(defaultRetry)
	return c
}

// Enabled implements config.PlatformConfig: any credential, of the
// section or of an account, turns Slack on.
func (c *Config) Enabled() bool {
	return c.defaultEnabled() || len(c.Accounts) > 0
}

// Env implements config.PlatformConfig.
func (c *Config) Env() []config.EnvVar {
	return []config.EnvVar{
		config.Env("SLACK_BOT_TOKEN", &c.BotToken),
		config.Env("SLACK_SIGNING_SECRET", &c.SigningSecret),
		config.Env("SLACK_APP_TOKEN", &c.AppToken),
		config.Env("SLACK_API_URL", &c.APIURL),
	}
}

// Validate implements config.PlatformConfig: once any credential is set,
// the bot token and a transport are required.
func (c *Config) Validate() error {
	var errs []error
	if c.defaultEnabled() {
		errs = append(errs, c.validateOwn())
	}
	return errors.Join(config.FlattenProblems(append(errs, c.validateAccounts())...)...)
}

// validateOwn checks one app's keys.
func (c *Config) validateOwn() error {
	var errs []error
	if !c.BotToken.IsSet() {
		errs = append(errs, errors.New("bot_token: SLACK_BOT_TOKEN is not set; the Slack channel needs the bot token (xoxb-…) to answer"))
	} else if !c.SigningSecret.IsSet() && !c.AppToken.IsSet() {
		errs = append(errs, errors.New("signing_secret: SLACK_BOT_TOKEN is set, but neither SLACK_APP_TOKEN (Socket Mode) nor SLACK_SIGNING_SECRET (Events API at "+EventsPath+") is, so Slack cannot reach Parley"))
	}
	if c.PostEvery < 0 {
		errs = append(errs, fmt.Errorf("post_every: %s is negative; leave it out for Slack's one post a second", c.PostEvery))
	}
	if c.PostBurst < 0 {
		errs = append(errs, fmt.Errorf("post_burst: %d is negative; leave it out for %d", c.PostBurst, DefaultPostBurst))
	}
	errs = append(errs, c.validateAppToken(), c.Retry.Validate())
	return errors.Join(errs...)
}

// validateAppToken refuses a token of the wrong kind (a bot token pasted as
// the app token), which Slack would refuse less clearly.
func (c *Config) validateAppToken() error {
	if c.AppToken.IsSet() && !strings.HasPrefix(c.AppToken.Reveal(), "xapp-") {
		return errors.New("app_token: SLACK_APP_TOKEN must be an app-level token (xapp-…) with the connections:write scope")
	}
	return nil
}

// identifyTimeout bounds the start-up auth.test.
const identifyTimeout = 10 * time.Second

// Open implements channels.Opener: an adapter that serves the Events API
// and slash commands when a signing secret is set and holds Socket Mode
// when an app token is. A token Slack refuses at start-up is an error;
// Slack being unreachable is not (Run keeps trying).
func (c *Config) Open(ctx context.Context, deps channels.Deps) (channels.Channel, error) {
	if !c.defaultEnabled() {
		return nil, nil
	}
	a, err := c.open(ctx, deps, "", true)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// open builds the adapter of one account (c holds its keys; account is
// "" for the default). A token Slack refuses is an error when mustSignIn,
// else the adapter is returned down and keeps trying.
func (c *Config) open(ctx context.Context, deps channels.Deps, account string, mustSignIn bool) (*Adapter, error) {
	r := c.Retry.Or(defaultRetry)
	a, err := New(*c, Options{
		MaxAttempts: r.MaxAttempts, RetryWait: r.Base, RetryMax: r.Max,
		Handler:    deps.Handler,
		HTTPClient: outbound.Client(outbound.Options{Conns: deps.Conns, Timeout: httpTimeout}),
		DMMatters:  deps.DMMatters,
		Redis:      deps.Redis,
		Prefix:     deps.Prefix,
		Account:    account,
	}, deps.Metrics, deps.Log)
	if err != nil {
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, identifyTimeout)
	defer cancel()
	if err := a.Identify(ictx); err != nil {
		if IsAuthError(err) && mustSignIn {
			return nil, fmt.Errorf("%w (check SLACK_BOT_TOKEN)", err)
		}
		a.log.Warn("auth.test failed at start-up; retrying in the background", "err", err)
	}
	var transports []string
	if c.SigningSecret.IsSet() {
		transports = append(transports, "events API at "+a.route(EventsPath)+", slash commands at "+a.route(CommandsPath))
	}
	if c.AppToken.IsSet() {
		transports = append(transports, "socket mode")
	}
	a.log.Info("configured", "transports", transports, "follow_threads", a.cfg.FollowThreads, "command", a.cfg.Command)
	return a, nil
}
