package mcp

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/retry"
)

// DefaultTimeout bounds one tool call when a server sets no timeout.
const DefaultTimeout = 30 * time.Second

// Transport names, as ServerState reports them.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// maxServerName leaves room for a tool name after "NAME__" within the 64
// characters a function name may have.
const maxServerName = 32

// Section is the key of the configuration under tools: (tools.mcp).
const Section = "mcp"

// The section is registered with the configuration, which decodes,
// validates and prints it with the rest of the file; read it with
// FromConfig.
func init() {
	config.RegisterToolSection(config.ToolSection{Name: Section, NewConfig: func() config.SectionConfig { return &Config{Retry: DefaultRetry} }})
}

var _ config.SectionConfig = (*Config)(nil)

// FromConfig returns c's tools.mcp section (no servers when c has none).
func FromConfig(c config.Config) Config {
	if m, ok := config.Tool[*Config](c, Section); ok {
		return *m
	}
	return Config{}
}

// Config is the tools.mcp section of the configuration.
type Config struct {
	// Servers maps a server's name, which prefixes its tools, to how to
	// reach it.
	Servers map[string]ServerConfig `yaml:"servers"`
	// Retry shapes how every server is connected: base and max bound the
	// backoff between connection attempts; max_attempts is how many
	// attempts each server gets at start-up before Parley starts without
	// it (it keeps trying in the background).
	Retry retry.Config `yaml:"retry"`
}

// DefaultRetry is the retry: section's defaults: one attempt before
// starting, then about 1 s doubling to about 1 min.
var DefaultRetry = retry.Config{MaxAttempts: 1, Base: time.Second, Max: time.Minute}

// ServerConfig is tools.mcp.servers.NAME. Exactly one of Command (a stdio
// server Parley starts) and URL (a streamable HTTP server) is set.
//
// Header values, environment values and the URL may name environment
// variables as ${NAME}; they are expanded when Parley connects, so secrets
// stay out of the file.
type ServerConfig struct {
	// Command and Args start a stdio server; Env adds to the few variables
	// it inherits (see docs/tools.md); Cwd is its working directory. Env
	// values often are tokens: a literal value never prints, a ${NAME}
	// reference prints as written (config.SecretTemplate).
	Command string                           `yaml:"command,omitempty"`
	Args    []string                         `yaml:"args,omitempty"`
	Env     map[string]config.SecretTemplate `yaml:"env,omitempty"`
	Cwd     string                           `yaml:"cwd,omitempty"`

	// URL is a streamable HTTP endpoint, printed as written: put a key it
	// carries in ${NAME}. Headers are sent with every request to its
	// origin; like Env's, their literal values never print.
	URL     string                           `yaml:"url,omitempty"`
	Headers map[string]config.SecretTemplate `yaml:"headers,omitempty"`
	// OAuth signs in to a url server that asks for OAuth (see OAuthConfig).
	OAuth *OAuthConfig `yaml:"oauth,omitempty"`

	// Timeout bounds one tool call (DefaultTimeout when zero).
	Timeout time.Duration `yaml:"timeout,omitempty"`

	// Read and Write are globs over the server's own tool names that set a
	// tool's class, overriding its readOnlyHint; Write wins when both match.
	Read  []string `yaml:"read,omitempty"`
	Write []string `yaml:"write,omitempty"`
	// TrustAnnotations takes the server's readOnlyHint for a read tool
	// even where a policy allows no writes (tools.write: false). Without
	// it a tool that is read only by its hint is offered only where
	// writes are allowed: a hint is the server's claim, and a server that
	// writes while claiming otherwise would reach a channel meant to have
	// no writes, past approve_writes too.
	TrustAnnotations bool `yaml:"trust_annotations,omitempty"`

	// Tools trims what is offered at all.
	Tools ToolFilter `yaml:"tools,omitempty"`
}

// ToolFilter selects a server's tools by their own names, as globs. Deny
// wins; an unset Allow allows every tool, a set but empty one none (which
// config.Names keeps apart when the section is printed).
type ToolFilter struct {
	Allow config.Names `yaml:"allow,omitempty"`
	Deny  []string     `yaml:"deny,omitempty"`
}

// Transport reports TransportStdio or TransportHTTP.
func (c ServerConfig) Transport() string {
	if c.Command != "" {
		return TransportStdio
	}
	return TransportHTTP
}

// withDefaults fills the zero fields.
func (c ServerConfig) withDefaults() ServerConfig {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}

// serverNameRE keeps "NAME__" unambiguous: no leading, trailing or doubled
// separator, so the first "__" of a tool's name always ends the server's.
var serverNameRE = regexp.MustCompile(`^[a-zA-Z0-9]+([_-][a-zA-Z0-9]+)*$`)

// headerNameRE is an HTTP token (RFC 9110).
var headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// Env implements config.SectionConfig: no variable overrides tools.mcp;
// values inside it name variables as ${NAME} instead.
func (c *Config) Env() []config.EnvVar { return nil }

// Validate reports every problem of c at once, each naming its key
// relative to the section ("servers.NAME.url: …"); config.Load puts them
// under tools.mcp.
func (c Config) Validate() error {
	var errs []error
	if err := c.Retry.Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Servers)) {
		key := "servers." + name
		if !serverNameRE.MatchString(name) || len(name) > maxServerName {
			errs = append(errs, fmt.Errorf("%s: the name must be letters and digits, optionally joined by single _ or -, at most %d characters (it prefixes the tools' names)", key, maxServerName))
		}
		errs = append(errs, c.Servers[name].validate(key)...)
	}
	return errors.Join(errs...)
}

func (c ServerConfig) validate(key string) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", key, field, fmt.Sprintf(format, args...)))
	}
	switch {
	case c.Command == "" && c.URL == "":
		errs = append(errs, fmt.Errorf("%s: set command (a stdio server) or url (a streamable HTTP server)", key))
	case c.Command != "" && c.URL != "":
		errs = append(errs, fmt.Errorf("%s: set command or url, not both", key))
	}
	if c.Command != "" && len(c.Headers) > 0 {
		bad("headers", "only for a url server")
	}
	if c.URL != "" {
		for _, f := range []struct {
			field string
			set   bool
		}{{"args", len(c.Args) > 0}, {"env", len(c.Env) > 0}, {"cwd", c.Cwd != ""}} {
			if f.set {
				bad(f.field, "only for a command server")
			}
		}
		// References stand for what they will hold, even in the host.
		if err := config.CheckEnvRefs(c.URL); err != nil {
			bad("url", "%v", err)
		} else if u, err := url.Parse(config.ReplaceEnvRefs(c.URL, func(string) string { return "x" })); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("url", "must be an absolute http or https URL")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Headers)) {
		if !headerNameRE.MatchString(k) {
			bad("headers", "%q is not a valid header name", k)
		}
		v := c.Headers[k].Reveal()
		if err := config.CheckEnvRefs(v); err != nil {
			bad("headers."+k, "%v", err)
		} else if strings.ContainsAny(v, "\r\n") {
			bad("headers."+k, "must be one line")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			bad("env", "%q is not a valid variable name", k)
		}
		if err := config.CheckEnvRefs(c.Env[k].Reveal()); err != nil {
			bad("env."+k, "%v", err)
		}
	}
	if c.OAuth != nil {
		errs = append(errs, c.OAuth.validate(key, c)...)
	}
	if c.Timeout < 0 {
		bad("timeout", "must not be negative")
	}
	for _, f := range []struct {
		field string
		globs []string
	}{{"read", c.Read}, {"write", c.Write}, {"tools.allow", c.Tools.Allow}, {"tools.deny", c.Tools.Deny}} {
		for _, g := range f.globs {
			if _, err := path.Match(g, ""); err != nil {
				bad(f.field, "%q is not a valid glob", g)
			}
		}
	}
	return errs
}

// EnvVars lists the environment variables the configuration names as
// ${NAME}, sorted, so that deployment checks can require them.
func (c Config) EnvVars() []string {
	seen := map[string]bool{}
	add := func(names []string) {
		for _, n := range names {
			seen[n] = true
		}
	}
	for _, s := range c.Servers {
		add(config.EnvRefNames(s.URL))
		for _, v := range s.Headers {
			add(v.EnvRefs())
		}
		for _, v := range s.Env {
			add(v.EnvRefs())
		}
		if s.OAuth != nil {
			add(s.OAuth.ClientSecret.EnvRefs())
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// expandMap expands every value of m (config.ExpandEnv); what names the
// map in errors. Every substituted value is handed to secret.
func expandMap(m map[string]config.SecretTemplate, what string, getenv func(string) string, secret func(string)) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, err := m[k].Expand(getenv, secret)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, k, err)
		}
		out[k] = v
	}
	return out, nil
}

// canonicalHeaders returns h with canonical header keys.
func canonicalHeaders(h map[string]string) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		out.Set(k, v)
	}
	return out
}
