package feishu

import "github.com/parleyhq/parley/channels"

// Transports implements channels.AccountTransports: each account's
// callback route (which refuses everything without a verification token
// or encrypt key, so is listed only with one) and its long connection
// (unless its mode is webhook), as its adapter mounts and runs them.
func (c *Config) Transports() map[string]channels.Transport {
	out := map[string]channels.Transport{}
	for name, acc := range c.accounts() {
		var t channels.Transport
		if acc.VerificationToken.IsSet() || acc.EncryptKey.IsSet() {
			t.Routes = []string{channels.AccountRoute(EventsPath, name)}
		}
		if acc.Mode != ModeWebhook {
			t.Connection = "long connection"
		}
		out[name] = t
	}
	return out
}

var _ channels.AccountTransports = (*Config)(nil)
