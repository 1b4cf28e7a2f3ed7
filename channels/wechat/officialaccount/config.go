package officialaccount

import (
	"context"
	"errors"
	"fmt"

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
// credentials turns it on (and Validate asks for the rest).
func (c *Config) Enabled() bool { return c.AppID != "" || c.AppSecret.IsSet() || c.Token.IsSet() }

// Env implements config.PlatformConfig.
func (c *Config) Env() []config.EnvVar {
	return append([]config.EnvVar{
		config.Env("WECHAT_OA_APP_ID", &c.AppID),
		config.Env("WECHAT_OA_APP_SECRET", &c.AppSecret),
		config.Env("WECHAT_OA_TOKEN", &c.Token),
		config.Env("WECHAT_OA_ENCODING_AES_KEY", &c.EncodingAESKey),
		config.Env("WECHAT_OA_BASE_URL", &c.BaseURL),
	}, config.EnvRefs(&c.AppSecret, &c.Token, &c.EncodingAESKey)...)
}

// Validate implements config.PlatformConfig.
func (c *Config) Validate() error {
	var errs []error
	if err := c.Retry.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.BaseURL != "" {
		if err := wxapi.CheckBaseURL(c.BaseURL); err != nil {
			errs = append(errs, fmt.Errorf("base_url: %w (WECHAT_OA_BASE_URL)", err))
		}
	}
	if !c.Enabled() {
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
	if !c.Enabled() {
		return nil, nil
	}
	a, err := New(*c, Options{Handler: deps.Handler, Redis: deps.Redis, Prefix: deps.Prefix, API: wxapi.ClientOptions{}.WithRetry(c.Retry)}, deps.Metrics, deps.Log)
	if err != nil {
		return nil, err
	}
	return a, nil
}
