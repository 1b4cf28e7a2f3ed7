package feishu

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"

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

// accountName is what an account may be called: it is a path segment of
// its route (/feishu/events/NAME) and a metric label value.
var accountName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

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
	var names []string
	if c.defaultEnabled() {
		names = append(names, channels.DefaultAccount)
	}
	return append(names, slices.Sorted(maps.Keys(c.Accounts))...)
}

// accounts returns every configured account's configuration by name.
func (c *Config) accounts() map[string]Config {
	out := map[string]Config{}
	if c.defaultEnabled() {
		own := *c
		own.Accounts = nil
		out[channels.DefaultAccount] = own
	}
	for name, acc := range c.Accounts {
		if acc != nil {
			out[name] = acc.config(*c)
		}
	}
	return out
}

// validateAccounts checks every account as the section is checked, under
// its key, and refuses names that cannot be routes and two accounts with
// the same app's credentials.
func (c *Config) validateAccounts() error {
	var errs []error
	seen := map[string]string{} // credential → the account that holds it
	accs := c.accounts()
	for _, name := range slices.Sorted(maps.Keys(accs)) {
		key := "accounts." + name
		if name == channels.DefaultAccount {
			if _, clash := c.Accounts[name]; clash {
				errs = append(errs, fmt.Errorf("%s: the section's own keys are the account named %s; name this account otherwise", key, name))
			}
			key = ""
		} else if !accountName.MatchString(name) {
			errs = append(errs, fmt.Errorf("%s: an account's name is part of its route (%s/NAME): use 1 to 32 lower-case letters, digits, - and _, starting with a letter or digit", key, EventsPath))
			continue
		}
		acc := accs[name]
		if key != "" {
			errs = append(errs, config.PrefixKeys(key, acc.Validate()))
		}
		for _, cred := range []struct{ what, value string }{
			{"app_id", acc.AppID}, {"app_secret", acc.AppSecret.Reveal()},
			{"verification_token", acc.VerificationToken.Reveal()}, {"encrypt_key", acc.EncryptKey.Reveal()},
		} {
			if cred.value == "" || cred.value == config.Redacted {
				continue // the mask config check prints is a warning of its own
			}
			id := cred.what + "\x00" + cred.value
			if other, dup := seen[id]; dup {
				errs = append(errs, fmt.Errorf("%s: the same %s as account %s; each account is an app of its own, with its own credentials", joinKey(key, cred.what), cred.what, other))
				continue
			}
			seen[id] = name
		}
	}
	return errors.Join(config.FlattenProblems(errs...)...)
}

// joinKey is key.sub, or sub for the section's own key.
func joinKey(key, sub string) string {
	if key == "" {
		return sub
	}
	return key + "." + sub
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
	accs := c.accounts()
	var out []channels.Channel
	for _, name := range slices.Sorted(maps.Keys(accs)) {
		account := name
		if name == channels.DefaultAccount {
			account = ""
		}
		cfg := accs[name]
		a, err := cfg.open(deps, account)
		if err != nil {
			return nil, fmt.Errorf("feishu account %s: %w", name, err)
		}
		out = append(out, a)
	}
	return out, nil
}

var (
	_ channels.AccountsOpener = (*Config)(nil)
	_ channels.Accounted      = (*Adapter)(nil)
)
