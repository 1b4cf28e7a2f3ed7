package officialaccount

import (
	"context"
	"errors"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/retry"
)

// AccountConfig is one more Official Account of the deployment
// (wechat_oa.accounts.NAME), served at /wechat/oa/NAME: its own app_id,
// app_secret, token and encoding_aes_key. What it leaves out it takes from
// the section (base_url, retry). The section's own keys are the account
// named default, at /wechat/oa.
type AccountConfig struct {
	AppID          string        `yaml:"app_id"`
	AppSecret      config.Secret `yaml:"app_secret"`
	Token          config.Secret `yaml:"token"`
	EncodingAESKey config.Secret `yaml:"encoding_aes_key"`
	BaseURL        string        `yaml:"base_url,omitempty"`
	Retry          retry.Config  `yaml:"retry,omitempty"`
}

// config is the account's configuration: the section's, with the
// account's own keys over it and no further accounts.
func (acc *AccountConfig) config(section Config) Config {
	c := section
	c.Accounts = nil
	c.AppID, c.AppSecret, c.Token, c.EncodingAESKey = acc.AppID, acc.AppSecret, acc.Token, acc.EncodingAESKey
	if acc.BaseURL != "" {
		c.BaseURL = acc.BaseURL
	}
	c.Retry = acc.Retry.Or(section.Retry)
	return c
}

// AccountNames lists the accounts the section configures, default first
// when its own keys turn the Official Account on; the policy tree's
// accounts levels may name only these.
func (c *Config) AccountNames() []string {
	return channels.AccountNames(c.defaultEnabled(), c.Accounts)
}

// accounts returns every configured account's configuration by name.
func (c *Config) accounts() map[string]Config {
	own := *c
	own.Accounts = nil
	return channels.AccountConfigs(c.defaultEnabled(), own, c.Accounts, func(acc *AccountConfig) Config { return acc.config(*c) })
}

// validateAccounts checks every account as the section is checked (see
// channels.ValidateAccounts): two accounts may not be one Official
// Account, nor share the token or key that sign and seal its callbacks.
func (c *Config) validateAccounts() error {
	_, declared := c.Accounts[channels.DefaultAccount]
	return channels.ValidateAccounts(channels.Accounts[Config]{
		ByName: c.accounts(), DeclaredDefault: declared, Route: Path,
		Validate: func(acc Config) error {
			if !acc.defaultEnabled() {
				return errors.New("app_id: required: an account is an Official Account of its own (app_id, app_secret, token)")
			}
			return acc.validateOwn()
		},
		Credentials: func(acc Config) []channels.Credential {
			return []channels.Credential{{Key: "app_id", Value: acc.AppID}, {Key: "app_secret", Value: acc.AppSecret.Reveal()}, {Key: "token", Value: acc.Token.Reveal()}, {Key: "encoding_aes_key", Value: acc.EncodingAESKey.Reveal()}}
		},
	})
}

// Account implements channels.Accounted: the account the adapter serves
// ("" for the section's own).
func (a *Adapter) Account() string { return a.opts.Account }

// accountLabel is the account label value of the adapter's metrics.
func (a *Adapter) accountLabel() string { return channels.AccountLabel(a.opts.Account) }

// showUp sets parley_account_up from the outcome of the last access-token
// try: 1 while the account holds a token, 0 while WeChat refuses it (a
// wrong secret, a replica's address not on the IP allowlist). Passive
// replies need no token, so a refusal does not make the replica unready.
func (a *Adapter) showUp(tokenErr error) {
	v := 0.0
	if tokenErr == nil {
		v = 1
	}
	a.m.AccountUp.WithLabelValues(Name, a.accountLabel()).Set(v)
}

// route is path for the default account and path/NAME for another.
func (a *Adapter) route(path string) string {
	if a.opts.Account == "" {
		return path
	}
	return path + "/" + a.opts.Account
}

// OpenAccounts implements channels.AccountsOpener: one adapter per
// account, each at its own route, verifying callbacks with its own token
// and key. With the default account alone it is Open.
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
