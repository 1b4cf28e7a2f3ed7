package web

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/parleyhq/parley/config"
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

// Keys of the sections under tools: in the configuration file.
const (
	FetchSection  = "web_fetch"
	SearchSection = "web_search"
)

// Both sections are registered with the configuration, which decodes,
// overrides, validates and prints them with the rest of the file; read
// them with FromConfig.
func init() {
	config.RegisterToolSection(config.ToolSection{Name: FetchSection, NewConfig: func() config.SectionConfig { return DefaultFetchConfig() }})
	config.RegisterToolSection(config.ToolSection{Name: SearchSection, NewConfig: func() config.SectionConfig { return DefaultSearchConfig() }})
}

var (
	_ config.SectionConfig = (*FetchConfig)(nil)
	_ config.SectionConfig = (*SearchConfig)(nil)
)

// Config is the web tools' part of the configuration file: the keys
// tools.web_fetch and tools.web_search.
type Config struct {
	Fetch  FetchConfig  `yaml:"web_fetch"`
	Search SearchConfig `yaml:"web_search"`
}

// FromConfig returns the web tools' sections of c (the defaults where c
// has none, as in a Config built by hand).
func FromConfig(c config.Config) Config {
	out := Config{Fetch: *DefaultFetchConfig(), Search: *DefaultSearchConfig()}
	if f, ok := config.Tool[*FetchConfig](c, FetchSection); ok {
		out.Fetch = *f
	}
	if s, ok := config.Tool[*SearchConfig](c, SearchSection); ok {
		out.Search = *s
	}
	return out
}

// Validate reports every problem of both sections at once, each naming its
// key in the file (tools.web_fetch.…, tools.web_search.…).
func (c Config) Validate() error {
	return errors.Join(
		config.PrefixKeys(config.ToolsKey+"."+FetchSection, c.Fetch.Validate()),
		config.PrefixKeys(config.ToolsKey+"."+SearchSection, c.Search.Validate()))
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

// DefaultFetchConfig returns tools.web_fetch with its defaults written out,
// as `parley config check` shows them.
func DefaultFetchConfig() *FetchConfig {
	return &FetchConfig{MaxBytes: DefaultMaxBytes, Timeout: DefaultFetchTimeout}
}

// Env implements config.SectionConfig: no variable overrides
// tools.web_fetch (an allow list belongs in the file).
func (c *FetchConfig) Env() []config.EnvVar { return nil }

func (c FetchConfig) withDefaults() FetchConfig {
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultFetchTimeout
	}
	return c
}

// Validate checks every key and names each bad one, relative to the
// section ("max_bytes: …").
func (c FetchConfig) Validate() error {
	var errs []error
	if c.MaxBytes < 0 || c.MaxBytes > maxMaxBytes {
		errs = append(errs, fmt.Errorf("max_bytes: %d is outside 0..%d (0 means %d)", c.MaxBytes, maxMaxBytes, DefaultMaxBytes))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout: %s is negative", c.Timeout))
	}
	if _, err := parseAllowList(c.AllowPrivate); err != nil {
		errs = append(errs, fmt.Errorf("allow_private: %w", err))
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
	// error, a log line, a tool result or `parley config check`.
	APIKey config.Secret `yaml:"api_key"`
	// MaxResults is how many results the model gets, 1..10; 0 means
	// DefaultMaxResults.
	MaxResults int `yaml:"max_results"`
	// Timeout bounds one search; 0 means DefaultSearchTimeout.
	Timeout time.Duration `yaml:"timeout"`
}

// Enabled reports whether web_search is offered.
func (c SearchConfig) Enabled() bool { return c.Provider != "" }

// DefaultSearchConfig returns tools.web_search with its defaults written
// out: no provider, so web_search is off.
func DefaultSearchConfig() *SearchConfig {
	return &SearchConfig{MaxResults: DefaultMaxResults, Timeout: DefaultSearchTimeout}
}

// Environment variables that override tools.web_search, so that a
// deployment can turn search on and keep the key out of the file.
const (
	EnvSearchProvider = "WEB_SEARCH_PROVIDER"
	EnvSearchURL      = "WEB_SEARCH_URL"
	EnvSearchAPIKey   = "WEB_SEARCH_API_KEY"
)

// Env implements config.SectionConfig.
func (c *SearchConfig) Env() []config.EnvVar {
	return []config.EnvVar{
		config.Env(EnvSearchProvider, &c.Provider),
		config.Env(EnvSearchURL, &c.URL),
		config.Env(EnvSearchAPIKey, &c.APIKey),
	}
}

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

// Validate checks every key and names each bad one, relative to the
// section ("provider: …"). The API key's value is never part of a message.
func (c SearchConfig) Validate() error {
	if !c.Enabled() {
		// A key or URL without a provider is a half-done setup, not a
		// choice: say so rather than run without search.
		if c.APIKey.IsSet() || strings.TrimSpace(c.URL) != "" {
			return fmt.Errorf("provider: empty, but url or api_key is set (set provider or %s to searxng, brave or tavily)", EnvSearchProvider)
		}
		return nil
	}
	d := c.withDefaults()
	var errs []error
	switch d.Provider {
	case ProviderSearXNG:
		if d.URL == "" {
			errs = append(errs, errors.New("url: required for provider searxng (the instance's base URL; or set "+EnvSearchURL+")"))
		}
		if d.APIKey.IsSet() {
			errs = append(errs, errors.New("api_key: provider searxng takes no API key"))
		}
	case ProviderBrave, ProviderTavily:
		if strings.TrimSpace(d.APIKey.Reveal()) == "" {
			errs = append(errs, fmt.Errorf("api_key: required for provider %s (or set %s)", d.Provider, EnvSearchAPIKey))
		}
	default:
		errs = append(errs, fmt.Errorf("provider: %q is not one of searxng, brave, tavily", c.Provider))
	}
	if d.URL != "" {
		if u, err := url.Parse(d.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, errors.New("url: must be an absolute http or https URL"))
		}
	}
	if c.MaxResults < 0 || c.MaxResults > maxMaxResults {
		errs = append(errs, fmt.Errorf("max_results: %d is outside 0..%d", c.MaxResults, maxMaxResults))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout: %s is negative", c.Timeout))
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
