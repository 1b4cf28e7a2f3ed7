package slack

import "github.com/parleyhq/parley/channels"

// Transports implements channels.AccountTransports: each account's
// Events API routes (with its signing secret) and its Socket Mode
// connection (with its app token), as its adapter mounts and runs them.
func (c *Config) Transports() map[string]channels.Transport {
	out := map[string]channels.Transport{}
	for name, acc := range c.accounts() {
		var t channels.Transport
		if acc.SigningSecret.IsSet() {
			for _, p := range []string{EventsPath, CommandsPath, InteractionsPath} {
				t.Routes = append(t.Routes, channels.AccountRoute(p, name))
			}
		}
		if acc.AppToken.IsSet() {
			t.Connection = "Socket Mode"
		}
		out[name] = t
	}
	return out
}

var _ channels.AccountTransports = (*Config)(nil)
