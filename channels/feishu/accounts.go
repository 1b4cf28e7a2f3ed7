package feishu

import (
	"context"
	"errors"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/retry"
)

// Account is one more Feishu (or Lark) app of the deployment
// (feishu.accounts.NAME), e.g. a second bot in the same tenant and groups:
// the keys an app has for itself. What an account leaves out it takes from
// the section (base_url, domain, mode, reply_in_thread, follow_threads,
// retry); its credentials are its own. The section's own keys are the
// account named default.
type Account struct {
	AppID             string        `yaml:"app_id"`
	AppSecret         config.Secret `yaml:"app_secret"`
	VerificationToken config.Secret `yaml:"verification_token"`
	EncryptKey        config.Secret `yaml:"encrypt_key"`
	BaseURL           string        `yaml:"base_url,omitempty"`
	Domain            string        `yaml:"domain,omitempty"`
	Mode              string        `yaml:"mode,omitempty"`
	ReplyInThread     *bool         `yaml:"reply_in_thread,omitempty"`
	FollowThreads     *bool         `yaml:"follow_threads,omitempty"`
	Retry             retry.Config  `yaml:"retry,omitempty"`
}

// config is the account's configuration: the section's, with the
// account's own keys over it and no further accounts.
func (acc *Account) config(section Config) Config {
	c := section
	c.Accounts = nil
	c.AppID, c.AppSecret, c.VerificationToken, c.EncryptKey = acc.AppID, acc.AppSecret, acc.VerificationToken, acc.EncryptKey
	if acc.BaseURL != "" {
		c.BaseURL = acc.BaseURL
	}
	if acc.Domain != "" {
		c.Domain = acc.Domain
	}
	if acc.Mode != "" {
		c.Mode = acc.Mode
	}
	if acc.ReplyInThread != nil {
		c.ReplyInThread = *acc.ReplyInThread
	}
	if acc.FollowThreads != nil {
		c.FollowThreads = *acc.FollowThreads
	}
	c.Retry = acc.Retry.Or(section.Retry)
	return c
}

// defaultEnabled reports whether the section's own keys configure an app.
func (c *Config) defaultEnabled() bool { return c.AppID != "" || c.AppSecret.IsSet() }

// AccountNames lists the accounts the section configures, default first
// when its own keys turn Feishu on; the policy tree's accounts levels may
// name only these.
func (c *Config) AccountNames() []string {
	return channels.AccountNames(c.defaultEnabled(), c.Accounts)
}

// accounts returns every configured account's configuration by name.
func (c *Config) accounts() map[string]Config {
	own := *c
	own.Accounts = nil
	return channels.AccountConfigs(c.defaultEnabled(), own, c.Accounts, func(acc *Account) Config { return acc.config(*c) })
}

// validateAccounts checks every account as the section is checked (see
// channels.ValidateAccounts).
func (c *Config) validateAccounts() error {
	_, declared := c.Accounts[channels.DefaultAccount]
	return channels.ValidateAccounts(channels.Accounts[Config]{
		ByName: c.accounts(), DeclaredDefault: declared, Route: EventsPath,
		Validate: func(acc Config) error {
			if !acc.defaultEnabled() {
				// The section's own keys may stay unset (Feishu off); an
				// account is there to be an app.
				return errors.New("app_id: an account is an app: set its app_id and app_secret")
			}
			return acc.Validate()
		},
		Credentials: func(acc Config) []channels.Credential {
			return []channels.Credential{{Key: "app_id", Value: acc.AppID}, {Key: "app_secret", Value: acc.AppSecret.Reveal()}, {Key: "verification_token", Value: acc.VerificationToken.Reveal()}, {Key: "encrypt_key", Value: acc.EncryptKey.Reveal()}}
		},
	})
}

// Account implements channels.Accounted: the account the adapter serves
// ("" for the section's own app).
func (a *Adapter) Account() string { return a.opts.Account }

// accountLabel is the account label value of the adapter's metrics.
func (a *Adapter) accountLabel() string { return channels.AccountLabel(a.opts.Account) }

// route is path for the default account and path/NAME for another.
func (a *Adapter) route(path string) string {
	if a.opts.Account == "" {
		return path
	}
	return path + "/" + a.opts.Account
}

// showUp sets parley_account_up: 1 while the account's app knows its bot
// and, with the long connection, while that connection is up.
func (a *Adapter) showUp() {
	a.mu.Lock()
	up := a.botID != "" && (!a.longConnection() || a.wsUp)
	a.mu.Unlock()
	v := 0.0
	if up {
		v = 1
	}
	a.m.AccountUp.WithLabelValues(Name, a.accountLabel()).Set(v)
}

// OpenAccounts implements channels.AccountsOpener: one adapter per
// account, each with its own route, long connection and bot. With the
// default account alone it is Open.
func (c *Config) OpenAccounts(ctx context.Context, deps channels.Deps) ([]channels.Channel, error) {
	if len(c.Accounts) == 0 {
		ch, err := c.Open(ctx, deps)
		if ch == nil || err != nil {
			return nil, err
		}
		return []channels.Channel{ch}, nil
	}
	return channels.OpenEachAccount(Name, c.accounts(), func(cfg Config, account string) (channels.Channel, error) {
		return cfg.open(deps, account)
	})
}

var (
	_ channels.AccountsOpener = (*Config)(nil)
	_ channels.Accounted      = (*Adapter)(nil)
)
