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

// Config is the tools.mcp section of the configuration.
type Config struct {
	// Servers maps a server's name, which prefixes its tools, to how to
	// reach it.
	Servers map[string]ServerConfig `yaml:"servers"`
}

// ServerConfig is tools.mcp.servers.NAME. Exactly one of Command (a stdio
// server Parley starts) and URL (a streamable HTTP server) is set.
//
// Header values, environment values and the URL may name environment
// variables as ${NAME}; they are expanded when Parley connects, so secrets
// stay out of the file.
type ServerConfig struct {
	// Command and Args start a stdio server; Env adds to the few variables
	// it inherits (see docs/tools.md); Cwd is its working directory. Env
	// values are Secrets: they often are tokens, and they never print.
	Command string                   `yaml:"command,omitempty"`
	Args    []string                 `yaml:"args,omitempty"`
	Env     map[string]config.Secret `yaml:"env,omitempty"`
	Cwd     string                   `yaml:"cwd,omitempty"`

	// URL is a streamable HTTP endpoint, printed as written: put a key it
	// carries in ${NAME}. Headers are sent with every request to its
	// origin; their values are Secrets.
	URL     string                   `yaml:"url,omitempty"`
	Headers map[string]config.Secret `yaml:"headers,omitempty"`

	// Timeout bounds one tool call (DefaultTimeout when zero).
	Timeout time.Duration `yaml:"timeout,omitempty"`

	// Read and Write are globs over the server's own tool names that set a
	// tool's class, overriding its readOnlyHint; Write wins when both match.
	Read  []string `yaml:"read,omitempty"`
	Write []string `yaml:"write,omitempty"`

	// Tools trims what is offered at all.
	Tools ToolFilter `yaml:"tools,omitempty"`
}

// ToolFilter selects a server's tools by their own names, as globs. Deny
// wins; an unset Allow allows every tool, a set but empty one none.
type ToolFilter struct {
	Allow []string `yaml:"allow,omitempty"`
	Deny  []string `yaml:"deny,omitempty"`
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

// Validate reports every problem of c at once, each naming its key.
func (c Config) Validate() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.Servers)) {
		key := "tools.mcp.servers." + name
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
		if err := checkRefs(c.URL); err != nil {
			bad("url", "%v", err)
		} else if u, err := url.Parse(refRE.ReplaceAllString(c.URL, "x")); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("url", "must be an absolute http or https URL")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Headers)) {
		if !headerNameRE.MatchString(k) {
			bad("headers", "%q is not a valid header name", k)
		}
		v := c.Headers[k].Reveal()
		if err := checkRefs(v); err != nil {
			bad("headers."+k, "%v", err)
		} else if strings.ContainsAny(v, "\r\n") {
			bad("headers."+k, "must be one line")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			bad("env", "%q is not a valid variable name", k)
		}
		if err := checkRefs(c.Env[k].Reveal()); err != nil {
			bad("env."+k, "%v", err)
		}
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
	add := func(s string) {
		for _, m := range refRE.FindAllStringSubmatch(s, -1) {
			seen[m[1]] = true
		}
	}
	for _, s := range c.Servers {
		add(s.URL)
		for _, v := range s.Headers {
			add(v.Reveal())
		}
		for _, v := range s.Env {
			add(v.Reveal())
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// refRE matches one ${NAME} reference.
var refRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// checkRefs reports a "${" that does not open a valid reference.
func checkRefs(s string) error {
	rest := refRE.ReplaceAllString(s, "")
	if strings.Contains(rest, "${") {
		return errors.New(`"${" must open an environment variable reference like ${NAME}`)
	}
	return nil
}

// expand replaces every ${NAME} in s with getenv(NAME). It fails, naming
// the variable but never a value, when one is unset or empty, so that a
// missing token is a clear startup error rather than an empty header.
// Every substituted value is handed to secret.
func expand(s string, getenv func(string) string, secret func(string)) (string, error) {
	var missing []string
	out := refRE.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		v := getenv(name)
		if v == "" {
			missing = append(missing, name)
		}
		secret(v)
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out, nil
}

// expandMap is expand over a map's values; what names the map in errors.
func expandMap(m map[string]config.Secret, what string, getenv func(string) string, secret func(string)) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, err := expand(m[k].Reveal(), getenv, secret)
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
