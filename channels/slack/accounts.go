package slack

import (
	"context"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/retry"
)

// Account is one more Slack app of the deployment (slack.accounts.NAME):
// the keys of the section an app has for itself. What an account leaves
// out it takes from the section (api_url, command, follow_threads,
// allow_mentions, post_every, post_burst, retry); its credentials are its own. The
// section's own keys are the account named default.
type Account struct {
	BotToken      config.Secret `yaml:"bot_token"`
	SigningSecret config.Secret `yaml:"signing_secret"`
	AppToken      config.Secret `yaml:"app_token"`
	APIURL        string        `yaml:"api_url,omitempty"`
	FollowThreads *bool         `yaml:"follow_threads,omitempty"`
	Command       string        `yaml:"command,omitempty"`
	AllowMentions *bool         `yaml:"allow_mentions,omitempty"`
	PostEvery     time.Duration `yaml:"post_every,omitempty"`
	PostBurst     int           `yaml:"post_burst,omitempty"`
	Retry         retry.Config  `yaml:"retry,omitempty"`
}

// config is the account's configuration: the section's, with the
// account's own keys over it and no further accounts.
func (acc *Account) config(section Config) Config {
	c := section
	c.Accounts = nil
	c.BotToken, c.SigningSecret, c.AppToken = acc.BotToken, acc.SigningSecret, acc.AppToken
	if acc.APIURL != "" {
		c.APIURL = acc.APIURL
	}
	if acc.FollowThreads != nil {
		c.FollowThreads = *acc.FollowThreads
	}
	if acc.Command != "" {
		c.Command = acc.Command
	}
	if acc.AllowMentions != nil {
		c.AllowMentions = *acc.AllowMentions
	}
	if acc.PostEvery != 0 {
		c.PostEvery = acc.PostEvery
	}
	if acc.PostBurst != 0 {
		c.PostBurst = acc.PostBurst
	}
	c.Retry = acc.Retry.Or(section.Retry)
	return c
}

// AccountNames lists the accounts the section configures, default first
// when its own keys turn Slack on; the policy tree's accounts levels may
// name only these.
func (c *Config) AccountNames() []string {
	return channels.AccountNames(c.defaultEnabled(), c.Accounts)
}

// defaultEnabled reports whether the section's own keys configure an app.
func (c *Config) defaultEnabled() bool {
	return c.BotToken.IsSet() || c.SigningSecret.IsSet() || c.AppToken.IsSet()
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
		Validate: func(acc Config) error { return acc.validateOwn() },
		Credentials: func(acc Config) []channels.Credential {
			return []channels.Credential{{Key: "bot_token", Value: acc.BotToken.Reveal()}, {Key: "signing_secret", Value: acc.SigningSecret.Reveal()}, {Key: "app_token", Value: acc.AppToken.Reveal()}}
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

// OpenAccounts implements channels.AccountsOpener: one adapter per
// account, each with its own routes, Socket Mode connection and bot user.
// With the default account alone it is Open. With several, an account
// whose token Slack refuses at start-up does not stop the others: it is
// opened down (Ready says so, and /readyz names it) and keeps trying to
// sign in in the background, as it would after a failure at any other
// time.
func (c *Config) OpenAccounts(ctx context.Context, deps channels.Deps) ([]channels.Channel, error) {
	accs := c.accounts()
	if len(c.Accounts) == 0 {
		ch, err := c.Open(ctx, deps)
		if ch == nil || err != nil {
			return nil, err
		}
		return []channels.Channel{ch}, nil
	}
	opened, err := channels.OpenEachAccount(Name, accs, func(cfg Config, account string) (*Adapter, error) {
		return cfg.open(ctx, deps, account, false)
	})
	if err != nil {
		return nil, err
	}
	out := make([]channels.Channel, 0, len(opened))
	for _, a := range opened {
		for _, p := range opened {
			if p != a {
				a.peers = append(a.peers, p)
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// addressesPeer reports whether text mentions the bot of another of the
// deployment's accounts: a follow-up in a thread this app follows that
// calls the other app by name is the other app's to answer (its
// app_mention event carries it), not this one's.
func (a *Adapter) addressesPeer(text string) bool {
	for _, p := range a.peers {
		if id := p.BotUserID(); id != "" && mentions(text, id) {
			return true
		}
	}
	return false
}

// signedIn records that the account's bot signed in (auth.test
// answered) or that Slack refused its token.
func (a *Adapter) signedIn(up bool) {
	if up {
		a.refused.Store(nil)
		a.identified.Store(true)
	}
	a.showUp()
}

// showUp sets parley_account_up: 1 while the account's bot is signed in,
// its token not refused since, and its Socket Mode connection (when it
// has one) up.
func (a *Adapter) showUp() {
	v := 0.0
	if a.identified.Load() && a.refused.Load() == nil && (!a.cfg.AppToken.IsSet() || a.connected.Load()) {
		v = 1
	}
	a.m.AccountUp.WithLabelValues(Name, a.accountLabel()).Set(v)
}
