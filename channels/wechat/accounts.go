package wechat

import (
	"context"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/retry"
)

// AccountConfig is one more WeChat app of the deployment
// (wechat.accounts.NAME): a personal-WeChat bot logged in with `parley
// wechat login --account NAME`, a WeCom AI bot, or both. What it leaves
// out it takes from the section (the iLink and WeCom URLs, media hosts,
// chunk_chars, retry); its WeCom credentials and its iLink logins are its
// own. The section's own keys are the account named default. (Account is
// an iLink login, which the file does not hold.)
type AccountConfig struct {
	ILinkBaseURL    string        `yaml:"ilink_base_url,omitempty"`
	ILinkCDNURL     string        `yaml:"ilink_cdn_url,omitempty"`
	WeComBotID      string        `yaml:"wecom_bot_id"`
	WeComSecret     config.Secret `yaml:"wecom_bot_secret"`
	WeComWSURL      string        `yaml:"wecom_ws_url,omitempty"`
	WeComMediaHosts []string      `yaml:"wecom_media_hosts,omitempty"`
	ChunkChars      int           `yaml:"chunk_chars,omitempty"`
	Retry           retry.Config  `yaml:"retry,omitempty"`
}

// config is the account's configuration: the section's, with the
// account's own keys over it and no further accounts.
func (acc *AccountConfig) config(section Config) Config {
	c := section
	c.Accounts = nil
	c.WeComBotID, c.WeComSecret = acc.WeComBotID, acc.WeComSecret
	for _, s := range []struct{ own, to *string }{
		{&acc.ILinkBaseURL, &c.ILinkBaseURL}, {&acc.ILinkCDNURL, &c.ILinkCDNURL}, {&acc.WeComWSURL, &c.WeComWSURL},
	} {
		if *s.own != "" {
			*s.to = *s.own
		}
	}
	if acc.WeComMediaHosts != nil {
		c.WeComMediaHosts = acc.WeComMediaHosts
	}
	if acc.ChunkChars != 0 {
		c.ChunkChars = acc.ChunkChars
	}
	c.Retry = acc.Retry.Or(section.Retry)
	return c
}

// AccountNames lists the accounts the section configures, default first;
// the policy tree's accounts levels may name only these. The default is
// always there: its iLink bots are turned on by a login, which the file
// does not show.
func (c *Config) AccountNames() []string {
	return channels.AccountNames(true, c.Accounts)
}

// ForAccount is the configuration of the account named name ("" or
// default: the section's own), and whether the section configures it:
// `parley wechat login --account` logs a bot in with it.
func (c *Config) ForAccount(name string) (Config, bool) {
	if name == "" {
		name = channels.DefaultAccount
	}
	cfg, ok := c.accounts()[name]
	return cfg, ok
}

// accounts returns every configured account's configuration by name.
func (c *Config) accounts() map[string]Config {
	own := *c
	own.Accounts = nil
	return channels.AccountConfigs(true, own, c.Accounts, func(acc *AccountConfig) Config { return acc.config(*c) })
}

// validateAccounts checks every account as the section is checked (see
// channels.ValidateAccounts): two accounts may not be one WeCom bot.
func (c *Config) validateAccounts() error {
	_, declared := c.Accounts[channels.DefaultAccount]
	return channels.ValidateAccounts(channels.Accounts[Config]{
		ByName: c.accounts(), DeclaredDefault: declared, Route: Name,
		Validate: func(acc Config) error { return acc.validateOwn() },
		Credentials: func(acc Config) []channels.Credential {
			return []channels.Credential{{Key: "wecom_bot_id", Value: acc.WeComBotID}, {Key: "wecom_bot_secret", Value: acc.WeComSecret.Reveal()}}
		},
	})
}

// StatePrefix is where an account's iLink logins, cursors, context tokens,
// leases and WeCom reply queue live in Redis: the deployment's prefix for
// the default account (the keys it had before accounts existed), with
// account:NAME: after it for another, so that two accounts never share a
// bot's state or lease.
func StatePrefix(prefix, account string) string {
	if account == "" || account == channels.DefaultAccount {
		return prefix
	}
	return prefix + "account:" + account + ":"
}

// Account implements channels.Accounted: the account the adapter serves
// ("" for the section's own app).
func (a *Adapter) Account() string { return a.opts.Account }

// accountLabel is the account label value of the adapter's metrics.
func (a *Adapter) accountLabel() string { return channels.AccountLabel(a.opts.Account) }

// OpenAccounts implements channels.AccountsOpener: one adapter per
// account, each with its own WeCom long connection, iLink logins and
// leases. With the default account alone it is Open (see open for when
// each is opened). An account WeCom refuses is opened down and keeps
// trying, beside the others.
func (c *Config) OpenAccounts(ctx context.Context, deps channels.Deps) ([]channels.Channel, error) {
	opened, err := channels.OpenEachAccount(Name, c.accounts(), func(cfg Config, account string) (*Adapter, error) {
		return cfg.open(ctx, deps, account)
	})
	if err != nil {
		return nil, err
	}
	// The default account opens nothing without a login or a WeCom bot.
	var out []channels.Channel
	for _, a := range opened {
		if a != nil {
			out = append(out, a)
		}
	}
	return out, nil
}

var (
	_ channels.AccountsOpener = (*Config)(nil)
	_ channels.Accounted      = (*Adapter)(nil)
)
