package channels

// Transport is how one account (app) of a platform is reached, as `parley
// config check` and the console show it: the routes its platform's
// webhooks come to and the connection it holds. It names no credential.
type Transport struct {
	// Routes are the paths of this server its webhooks reach it at
	// (/slack/events/hr…); none when it takes no webhooks.
	Routes []string
	// Connection is the connection the account holds to its platform
	// ("Socket Mode", "long connection"); "" for none.
	Connection string
}

// String is the transport in a few words: "Socket Mode",
// "webhooks at /feishu/events/hr", or both.
func (t Transport) String() string {
	var s string
	if len(t.Routes) > 0 {
		s = "webhooks at " + t.Routes[0]
		for _, r := range t.Routes[1:] {
			s += ", " + r
		}
	}
	if t.Connection != "" {
		if s != "" {
			s += "; "
		}
		s += t.Connection
	}
	if s == "" {
		return "nothing reaches it"
	}
	return s
}

// AccountTransports is implemented by a platform's section that
// configures accounts: Transports returns, by account name (DefaultAccount
// for the section's own keys), how each is reached. A section without it
// is listed by its accounts' names alone.
type AccountTransports interface {
	Transports() map[string]Transport
}

// AccountRoute is an account's route of a platform's path: path itself
// for the default account ("" or DefaultAccount), path/NAME for another.
func AccountRoute(path, account string) string {
	if account == "" || account == DefaultAccount {
		return path
	}
	return path + "/" + account
}
