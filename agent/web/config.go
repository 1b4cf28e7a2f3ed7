package web

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Defaults applied to zero configuration fields. They are exported so that
// the configuration file's defaults come from this one place.
const (
	// DefaultMaxBytes caps one download, counted on the decompressed body.
	DefaultMaxBytes = 5 << 20
	// DefaultFetchTimeout bounds one web_fetch call: connecting, every
	// redirect and reading the body.
	DefaultFetchTimeout = 30 * time.Second
	// DefaultSearchTimeout bounds one web_search call.
	DefaultSearchTimeout = 15 * time.Second
	// DefaultMaxResults is how many search results the model gets.
	DefaultMaxResults = 5

	// DefaultBraveURL and DefaultTavilyURL are the hosted APIs' base URLs;
	// tests and proxies replace them with tools.web_search.url.
	DefaultBraveURL  = "https://api.search.brave.com"
	DefaultTavilyURL = "https://api.tavily.com"
)

// Limits on configured values: past them a value is a mistake, not a choice.
const (
	maxMaxBytes   = 64 << 20
	maxMaxResults = 10
)

// Search providers (tools.web_search.provider).
const (
	ProviderSearXNG = "searxng"
	ProviderBrave   = "brave"
	ProviderTavily  = "tavily"
)

// Config is the web tools' part of the configuration file: the keys
// tools.web_fetch and tools.web_search.
type Config struct {
	Fetch  FetchConfig  `yaml:"web_fetch"`
	Search SearchConfig `yaml:"web_search"`
}

// Validate reports every problem of both sections at once.
func (c Config) Validate() error {
	return errors.Join(c.Fetch.Validate(), c.Search.Validate())
}

// FetchConfig is tools.web_fetch.
type FetchConfig struct {
	// AllowPrivate lists what web_fetch may reach although the SSRF guard
	// would refuse it: CIDRs ("10.20.0.0/16"), single addresses, host
	// names ("wiki.corp.example") and "*.corp.example" for a domain's
	// subdomains. Cloud metadata addresses stay refused whatever it says.
	AllowPrivate []string `yaml:"allow_private"`
	// MaxBytes caps the decompressed body; 0 means DefaultMaxBytes.
	MaxBytes int64 `yaml:"max_bytes"`
	// Timeout bounds the whole call; 0 means DefaultFetchTimeout.
	Timeout time.Duration `yaml:"timeout"`
}

func (c FetchConfig) withDefaults() FetchConfig {
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultFetchTimeout
	}
	return c
}

// Validate checks every key and names each bad one.
func (c FetchConfig) Validate() error {
	var errs []error
	if c.MaxBytes < 0 || c.MaxBytes > maxMaxBytes {
		errs = append(errs, fmt.Errorf("tools.web_fetch.max_bytes: %d is outside 0..%d (0 means %d)", c.MaxBytes, maxMaxBytes, DefaultMaxBytes))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("tools.web_fetch.timeout: %s is negative", c.Timeout))
	}
	if _, err := parseAllowList(c.AllowPrivate); err != nil {
		errs = append(errs, fmt.Errorf("tools.web_fetch.allow_private: %w", err))
	}
	return errors.Join(errs...)
}

// SearchConfig is tools.web_search. With no provider, web_search is not
// offered at all.
type SearchConfig struct {
	// Provider is searxng, brave or tavily; empty turns web_search off.
	Provider string `yaml:"provider"`
	// URL is the provider's base URL: required for searxng (the instance,
	// e.g. http://searxng:8080), optional for brave and tavily.
	URL string `yaml:"url"`
	// APIKey authenticates to brave and tavily. It never appears in an
	// error, a log line or a tool result.
	APIKey string `yaml:"api_key"`
	// MaxResults is how many results the model gets, 1..10; 0 means
	// DefaultMaxResults.
	MaxResults int `yaml:"max_results"`
	// Timeout bounds one search; 0 means DefaultSearchTimeout.
	Timeout time.Duration `yaml:"timeout"`
}

// Enabled reports whether web_search is offered.
func (c SearchConfig) Enabled() bool { return c.Provider != "" }

func (c SearchConfig) withDefaults() SearchConfig {
	c.Provider = strings.ToLower(strings.TrimSpace(c.Provider))
	c.URL = strings.TrimRight(strings.TrimSpace(c.URL), "/")
	if c.URL == "" {
		switch c.Provider {
		case ProviderBrave:
			c.URL = DefaultBraveURL
		case ProviderTavily:
			c.URL = DefaultTavilyURL
		}
	}
	if c.MaxResults <= 0 {
		c.MaxResults = DefaultMaxResults
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultSearchTimeout
	}
	return c
}

// Validate checks every key and names each bad one. The API key's value is
// never part of a message.
func (c SearchConfig) Validate() error {
	if !c.Enabled() {
		return nil
	}
	d := c.withDefaults()
	var errs []error
	switch d.Provider {
	case ProviderSearXNG:
		if d.URL == "" {
			errs = append(errs, errors.New("tools.web_search.url: required for provider searxng (the instance's base URL)"))
		}
		if d.APIKey != "" {
			errs = append(errs, errors.New("tools.web_search.api_key: provider searxng takes no API key"))
		}
	case ProviderBrave, ProviderTavily:
		if strings.TrimSpace(d.APIKey) == "" {
			errs = append(errs, fmt.Errorf("tools.web_search.api_key: required for provider %s", d.Provider))
		}
	default:
		errs = append(errs, fmt.Errorf("tools.web_search.provider: %q is not one of searxng, brave, tavily", c.Provider))
	}
	if d.URL != "" {
		if u, err := url.Parse(d.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, errors.New("tools.web_search.url: must be an absolute http or https URL"))
		}
	}
	if c.MaxResults < 0 || c.MaxResults > maxMaxResults {
		errs = append(errs, fmt.Errorf("tools.web_search.max_results: %d is outside 0..%d", c.MaxResults, maxMaxResults))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("tools.web_search.timeout: %s is negative", c.Timeout))
	}
	return errors.Join(errs...)
}

// allowList is the parsed tools.web_fetch.allow_private.
type allowList struct {
	prefixes []netip.Prefix
	hosts    map[string]bool
	suffixes []string // ".corp.example" for "*.corp.example"
}

func parseAllowList(entries []string) (allowList, error) {
	var (
		a    = allowList{hosts: map[string]bool{}}
		errs []error
	)
	for _, raw := range entries {
		e := strings.ToLower(strings.TrimSpace(raw))
		switch {
		case e == "":
			errs = append(errs, errors.New("empty entry"))
		case strings.Contains(e, "/"):
			p, err := netip.ParsePrefix(e)
			if err != nil {
				errs = append(errs, fmt.Errorf("%q is not a CIDR", raw))
				continue
			}
			if p.Bits() == 0 {
				errs = append(errs, fmt.Errorf("%q would switch the guard off; list the networks you mean", raw))
				continue
			}
			a.prefixes = append(a.prefixes, p.Masked())
		case strings.HasPrefix(e, "*."):
			name, _, err := parseHost(e[2:])
			if err != nil || name == "" {
				errs = append(errs, fmt.Errorf("%q is not a domain wildcard such as *.corp.example", raw))
				continue
			}
			a.suffixes = append(a.suffixes, "."+name)
		default:
			name, ip, err := parseHost(strings.Trim(e, "[]"))
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%q is neither a CIDR, an address nor a host name", raw))
			case ip.IsValid():
				a.prefixes = append(a.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
			default:
				a.hosts[name] = true
			}
		}
	}
	return a, errors.Join(errs...)
}

// allows reports whether the operator let web_fetch reach addr under the
// host name name ("" for a literal address).
func (a allowList) allows(name string, addr netip.Addr) bool {
	for _, p := range a.prefixes {
		if p.Contains(addr) {
			return true
		}
	}
	if name == "" {
		return false
	}
	if a.hosts[name] {
		return true
	}
	for _, s := range a.suffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}
