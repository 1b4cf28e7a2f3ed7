package officialaccount

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat"
	"github.com/parleyhq/parley/channels/wechat/wxapi"
	"github.com/parleyhq/parley/channels/wechat/wxcrypto"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/retry"
)

// DefaultBaseURL is the Official Account API.
const DefaultBaseURL = "https://api.weixin.qq.com"

// Config is the wechat_oa: section of the configuration file; the
// WECHAT_OA_* environment variables override it. AppID, AppSecret and
// Token turn the Official Account on; EncodingAESKey selects the message
// mode: set, callbacks must be encrypted (compatible or safe mode); empty,
// they are plaintext.
type Config struct {
	AppID          string        `yaml:"app_id"`           // WECHAT_OA_APP_ID
	AppSecret      config.Secret `yaml:"app_secret"`       // WECHAT_OA_APP_SECRET
	Token          config.Secret `yaml:"token"`            // WECHAT_OA_TOKEN
	EncodingAESKey config.Secret `yaml:"encoding_aes_key"` // WECHAT_OA_ENCODING_AES_KEY
	// BaseURL is the API host (default DefaultBaseURL), for proxies and
	// tests (WECHAT_OA_BASE_URL).
	BaseURL string `yaml:"base_url"`
	// Retry shapes the retries of one API call: tries, first wait,
	// longest wait.
	Retry retry.Config `yaml:"retry"`
	// Accounts are further Official Accounts served beside the section's
	// own (wechat_oa.accounts.NAME), each at its own route
	// (/wechat/oa/NAME) with its own credentials. The section's own keys
	// are the account named default.
	Accounts map[string]*AccountConfig `yaml:"accounts,omitempty"`
}

func init() {
	config.RegisterPlatform(config.Platform{
		Name:      Name,
		NewConfig: func() config.PlatformConfig { return DefaultConfig() },
		// Anyone can follow an Official Account: write tools are off
		// unless wechat_oa's own policy turns them on, as on WeChat.
		Policy: wechat.BuiltinPolicy(),
	})
}

var (
	_ config.PlatformConfig = (*Config)(nil)
	_ channels.Opener       = (*Config)(nil)
)

// DefaultConfig returns the section's defaults.
func DefaultConfig() *Config { return &Config{Retry: wxapi.DefaultRetry, BaseURL: DefaultBaseURL} }

// Enabled implements config.PlatformConfig: any of the account's
// credentials, or a further account, turns it on (and Validate asks for
// the rest).
func (c *Config) Enabled() bool { return c.defaultEnabled() || len(c.Accounts) > 0 }

// defaultEnabled reports whether the section's own keys configure an
// Official Account.
func (c *Config) defaultEnabled() bool {
	return c.AppID != "" || c.AppSecret.IsSet() || c.Token.IsSet()
}

// Env implements config.PlatformConfig.
// An account's secrets have no variables of their own: they may be
// written "${NAME}" (config.EnvRefs).
func (c *Config) Env() []config.EnvVar {
	vars := append([]config.EnvVar{
		config.Env("WECHAT_OA_APP_ID", &c.AppID),
		config.Env("WECHAT_OA_APP_SECRET", &c.AppSecret),
		config.Env("WECHAT_OA_TOKEN", &c.Token),
		config.Env("WECHAT_OA_ENCODING_AES_KEY", &c.EncodingAESKey),
		config.Env("WECHAT_OA_BASE_URL", &c.BaseURL),
	}, config.EnvRefs(&c.AppSecret, &c.Token, &c.EncodingAESKey)...)
	for _, name := range slices.Sorted(maps.Keys(c.Accounts)) {
		if acc := c.Accounts[name]; acc != nil {
			vars = append(vars, config.EnvRefs(&acc.AppSecret, &acc.Token, &acc.EncodingAESKey)...)
		}
	}
	return vars
}

// Validate implements config.PlatformConfig: the section's own keys, and
// each account's (see validateAccounts).
func (c *Config) Validate() error {
	return errors.Join(config.FlattenProblems(c.validateOwn(), c.validateAccounts())...)
}

// validateOwn checks one Official Account's keys.
func (c *Config) validateOwn() error {
	var errs []error
	if err := c.Retry.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.BaseURL != "" {
		if err := wxapi.CheckBaseURL(c.BaseURL); err != nil {
			errs = append(errs, fmt.Errorf("base_url: %w (WECHAT_OA_BASE_URL)", err))
		}
	}
	if !c.defaultEnabled() {
		return errors.Join(errs...)
	}
	if c.AppID == "" {
		errs = append(errs, errors.New("app_id: required with the other credentials (WECHAT_OA_APP_ID)"))
	}
	for _, s := range []struct {
		key, env string
		value    config.Secret
		required bool
	}{
		{"app_secret", "WECHAT_OA_APP_SECRET", c.AppSecret, true},
		{"token", "WECHAT_OA_TOKEN", c.Token, true},
		{"encoding_aes_key", "WECHAT_OA_ENCODING_AES_KEY", c.EncodingAESKey, false},
	} {
		switch err := config.UnresolvedEnvRef(s.value); {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", s.key, err))
		case s.required && !s.value.IsSet():
			errs = append(errs, fmt.Errorf("%s: required with the other credentials (%s)", s.key, s.env))
		}
	}
	if c.EncodingAESKey.IsSet() && config.UnresolvedEnvRef(c.EncodingAESKey) == nil {
		if _, err := wxcrypto.DecodeKey(c.EncodingAESKey.Reveal()); err != nil {
			errs = append(errs, fmt.Errorf("encoding_aes_key: not an EncodingAESKey (%d base64 characters; WECHAT_OA_ENCODING_AES_KEY)", wxcrypto.KeyLength))
		}
	}
	return errors.Join(errs...)
}

// Open implements channels.Opener: the adapter, when the account is
// configured.
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
	return New(*c, Options{Handler: deps.Handler, Redis: deps.Redis, Prefix: deps.Prefix, Account: account, API: wxapi.ClientOptions{}.WithRetry(c.Retry)}, deps.Metrics, deps.Log)
}
