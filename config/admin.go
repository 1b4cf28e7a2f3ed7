package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/textproto"
	"time"
)

// Admin configures the admin console: a web page for operators on a
// listener of its own, so that it is never served on the public webhook
// port by accident.
type Admin struct {
	// Listen is host:port of the console (PARLEY_ADMIN_LISTEN). Empty or
	// "off" turns it off; so does having no way to sign in (neither a
	// token nor a trusted header).
	Listen string `yaml:"listen"`
	// Token signs operators in (PARLEY_ADMIN_TOKEN): on the sign-in form,
	// or as "Authorization: Bearer TOKEN" from scripts.
	Token Secret `yaml:"token"`
	// TrustedHeader names the header an SSO proxy puts the signed-in user
	// in (e.g. X-Forwarded-User). It is believed only from TrustedProxies.
	TrustedHeader  string   `yaml:"trusted_header"`
	TrustedProxies []string `yaml:"trusted_proxies"`
	// SessionTTL is how long a sign-in lasts.
	SessionTTL time.Duration `yaml:"session_ttl"`
	// GrafanaURL, when set, is linked from the overview.
	GrafanaURL string `yaml:"grafana_url"`
}

// Admin console defaults.
const (
	DefaultAdminListen     = "127.0.0.1:8081"
	DefaultAdminSessionTTL = 12 * time.Hour
	// MinAdminTokenLen keeps a guessable token out: the console can change
	// what the bot does.
	MinAdminTokenLen = 16
)

// Enabled reports whether the console is served: a listen address and a
// way to sign in.
func (a Admin) Enabled() bool {
	return a.Listen != "" && a.Listen != "off" && (a.Token.IsSet() || a.TrustedHeader != "")
}

// Proxies parses TrustedProxies (CIDRs or single addresses); Validate has
// already refused malformed entries, which are skipped here.
func (a Admin) Proxies() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range a.TrustedProxies {
		if p, err := parseProxy(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func parseProxy(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen()), nil
}

func (a Admin) validate() []string {
	var errs []string
	bad := func(key, format string, args ...any) {
		errs = append(errs, key+": "+fmt.Sprintf(format, args...))
	}
	if a.Listen != "" && a.Listen != "off" {
		if _, _, err := net.SplitHostPort(a.Listen); err != nil {
			bad("admin.listen", "%q is not host:port (or empty to turn the console off)", a.Listen)
		}
	}
	if a.Token.IsSet() && len([]rune(a.Token.Reveal())) < MinAdminTokenLen {
		bad("admin.token", "must be at least %d characters (PARLEY_ADMIN_TOKEN)", MinAdminTokenLen)
	}
	if a.TrustedHeader != "" {
		if textproto.CanonicalMIMEHeaderKey(a.TrustedHeader) == "Authorization" || a.TrustedHeader == "Cookie" {
			bad("admin.trusted_header", "%q cannot carry a user name", a.TrustedHeader)
		}
		if len(a.TrustedProxies) == 0 {
			bad("admin.trusted_proxies", "must name the proxies (CIDRs) admin.trusted_header is believed from; without them anyone could send it")
		}
	}
	for i, s := range a.TrustedProxies {
		if _, err := parseProxy(s); err != nil {
			bad(fmt.Sprintf("admin.trusted_proxies[%d]", i), "%q is not a CIDR or an IP address", s)
		}
	}
	if a.SessionTTL <= 0 {
		bad("admin.session_ttl", "must be a positive duration such as 12h")
	}
	return errs
}
