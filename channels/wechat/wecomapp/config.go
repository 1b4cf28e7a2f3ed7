package wecomapp

import (
	"context"
	"errors"
	"fmt"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat"
	"github.com/parleyhq/parley/channels/wechat/wxapi"
	"github.com/parleyhq/parley/channels/wechat/wxcrypto"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/internal/ident"
	"github.com/parleyhq/parley/retry"
)

// DefaultBaseURL is the WeCom server API.
const DefaultBaseURL = "https://qyapi.weixin.qq.com"

// Values of App.Format.
const (
	FormatMarkdown = "markdown" // WeCom's markdown messages (the default)
	FormatText     = "text"     // plain text, for apps used from WeChat
)

// Config is the wecom_app: section of the configuration file: the
// self-built apps Parley answers for. Apps have no fixed environment
// variables; write a credential as "${NAME}" to read it from NAME.
type Config struct {
	Apps []App `yaml:"apps"`
	// Retry shapes the retries of one API call: tries, first wait,
	// longest wait.
	Retry retry.Config `yaml:"retry"`
}

// App is one self-built app (自建应用) of one WeCom organisation.
type App struct {
	// Name names the app in Parley: its callback path /wecom/app/NAME,
	// its workspace in conversation keys and policies.
	Name    string `yaml:"name"`
	CorpID  string `yaml:"corp_id"`
	AgentID int64  `yaml:"agent_id"`
	// Secret is the app's Secret (for access tokens).
	Secret config.Secret `yaml:"secret"`
	// Token and EncodingAESKey are the callback settings of the app's
	// "receive messages" (接收消息) page.
	Token          config.Secret `yaml:"token"`
	EncodingAESKey config.Secret `yaml:"encoding_aes_key"`
	// BaseURL is the server API (default DefaultBaseURL), for proxies and
	// tests.
	BaseURL string `yaml:"base_url"`
	// Format is "markdown" (default; rendered by the WeCom client) or
	// "text" (members who use the app from WeChat see markdown as raw
	// text).
	Format string `yaml:"format"`
	// AppChat, when set, is a group chat the app created (appchat/create)
	// where the app answers instead of in the member's private chat, so
	// that the team reads every question and answer.
	AppChat string `yaml:"appchat"`
}

func init() {
	config.RegisterPlatform(config.Platform{
		Name:      Name,
		NewConfig: func() config.PlatformConfig { return DefaultConfig() },
		// Anyone in the organisation can message the app: write tools are
		// off unless wecom_app's own policy turns them on, as on WeChat.
		Policy: wechat.BuiltinPolicy(),
	})
}

var (
	_ config.PlatformConfig = (*Config)(nil)
	_ channels.Opener       = (*Config)(nil)
)

// DefaultConfig returns the section's defaults: no apps.
func DefaultConfig() *Config { return &Config{Retry: wxapi.DefaultRetry} }

// Enabled implements config.PlatformConfig: any app turns WeCom apps on.
func (c *Config) Enabled() bool { return len(c.Apps) > 0 }

// Env implements config.PlatformConfig: credentials written "${NAME}".
func (c *Config) Env() []config.EnvVar {
	var vars []config.EnvVar
	for i := range c.Apps {
		a := &c.Apps[i]
		vars = append(vars, config.EnvRefs(&a.Secret, &a.Token, &a.EncodingAESKey)...)
	}
	return vars
}

// validName says whether s may be a name in a URL path and a conversation
// key: ^[a-z0-9][a-z0-9_-]{0,63}$.
func validName(s string) bool { return ident.Name(s, 64) }

// Validate implements config.PlatformConfig.
func (c *Config) Validate() error {
	var errs []error
	if err := c.Retry.Validate(); err != nil {
		errs = append(errs, err)
	}
	seen := map[string]bool{}
	for i, a := range c.Apps {
		key := fmt.Sprintf("apps[%d]", i)
		bad := func(field, format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s.%s: "+format, append([]any{key, field}, args...)...))
		}
		switch {
		case !validName(a.Name):
			bad("name", "%q must be lower-case letters, digits, - or _ (it is the callback path /wecom/app/NAME)", a.Name)
		case seen[a.Name]:
			bad("name", "%q is used by two apps", a.Name)
		}
		seen[a.Name] = true
		if a.CorpID == "" {
			bad("corp_id", "required (the organisation's CorpID)")
		}
		if a.AgentID <= 0 {
			bad("agent_id", "required (the app's AgentId)")
		}
		for _, s := range []struct {
			field string
			value config.Secret
		}{{"secret", a.Secret}, {"token", a.Token}, {"encoding_aes_key", a.EncodingAESKey}} {
			if err := config.UnresolvedEnvRef(s.value); err != nil {
				bad(s.field, "%v", err)
			} else if !s.value.IsSet() {
				bad(s.field, "required")
			}
		}
		if a.EncodingAESKey.IsSet() && config.UnresolvedEnvRef(a.EncodingAESKey) == nil {
			if _, err := wxcrypto.DecodeKey(a.EncodingAESKey.Reveal()); err != nil {
				bad("encoding_aes_key", "not an EncodingAESKey (%d base64 characters)", wxcrypto.KeyLength)
			}
		}
		if a.BaseURL != "" {
			if err := wxapi.CheckBaseURL(a.BaseURL); err != nil {
				bad("base_url", "%v", err)
			}
		}
		switch a.Format {
		case "", FormatMarkdown, FormatText:
		default:
			bad("format", "%q must be markdown or text", a.Format)
		}
	}
	return errors.Join(errs...)
}

// withDefaults fills what the file leaves empty.
func (a App) withDefaults() App {
	if a.BaseURL == "" {
		a.BaseURL = DefaultBaseURL
	}
	if a.Format == "" {
		a.Format = FormatMarkdown
	}
	return a
}

// Open implements channels.Opener: the adapter, when an app is configured.
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
