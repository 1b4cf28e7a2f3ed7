// Package config loads Parley's one YAML file, applies the environment
// overrides, and validates the result. Every error names the key it is
// about, so an operator can fix a file without reading code.
//
// The keys of the file itself (listen, home, workspace, log, redis,
// server, …) are defined here. Each other section is defined by the
// package that uses it and registered from its init function: a top-level
// section (model:, sessions:, media:, gateway:) with RegisterSection, a chat
// platform's (slack:, feishu:, wechat:) with RegisterPlatform, one under
// tools: (tools.mcp, tools.web_fetch, …) with RegisterToolSection. Load
// decodes, overrides, validates and prints those sections like the rest;
// each section's defaults are set in one place, its package's.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the whole effective configuration.
type Config struct {
	Listen    string `yaml:"listen"`
	Home      string `yaml:"home"`
	Workspace string `yaml:"workspace"`

	Log    Log    `yaml:"log"`
	Redis  Redis  `yaml:"redis"`
	Outbox Outbox `yaml:"outbox"`
	Server Server `yaml:"server"`
	Skills Skills `yaml:"skills"`
	Admin  Admin  `yaml:"admin"`

	// Sections holds every registered top-level section (sessions:,
	// media:, gateway:, …) by name (see SectionOf and RegisterSection).
	// Sections are pointers: copies of a Config share them.
	Sections map[string]SectionConfig `yaml:"-"`

	// Tools holds the section of every registered tool section, by name
	// (see Tool and RegisterToolSection). In the file each is a key under
	// tools:, e.g. tools.mcp. Sections are pointers: copies of a Config
	// share them.
	Tools map[string]SectionConfig `yaml:"-"`

	// Platforms holds the section of every registered platform, by name
	// (see Section). In the file each is a top-level key: slack:, …
	// Sections are pointers: copies of a Config share them.
	Platforms map[string]PlatformConfig `yaml:"-"`
}

// core is Config without its methods: the core keys of the document.
type core Config

// Log selects the slog handler.
type Log struct {
	Format string `yaml:"format"` // text or json (PARLEY_LOG_FORMAT)
	Level  string `yaml:"level"`  // debug, info, warn, error
}

// Redis is the shared store. An empty URL means the in-memory store.
type Redis struct {
	URL    SecretURL `yaml:"url"`
	Prefix string    `yaml:"prefix"`
}

// Server bounds what a client of the HTTP listener (webhooks, probes,
// metrics) may hold: every phase of a request has a deadline, and only
// MaxConcurrentBodies requests may be reading a body at once, so slow or
// unauthenticated clients cannot pin memory.
type Server struct {
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout  time.Duration `yaml:"read_timeout"`
	WriteTimeout time.Duration `yaml:"write_timeout"`
	IdleTimeout  time.Duration `yaml:"idle_timeout"`
	// MaxConcurrentBodies is how many requests with a body may be read and
	// handled at once; one more is answered 503 at once, its body unread.
	MaxConcurrentBodies int `yaml:"max_concurrent_bodies"`
	// MetricsListen, when set, serves /metrics on this address alone and
	// no longer on Listen (PARLEY_METRICS_LISTEN).
	MetricsListen string `yaml:"metrics_listen"`
}

// Outbox bounds how long a reply that could not be delivered is tried
// again before it is counted as failed.
type Outbox struct {
	MaxAge time.Duration `yaml:"max_age"`
}

// Skills configures the skill layers' budgets.
type Skills struct {
	BodyBudget int `yaml:"body_budget"` // bytes of injections kept in one history
	// Index pins skills into the system-prompt index, after the builtin
	// and workspace skills and before the rest by name (skills.IndexRule).
	Index []string `yaml:"index"`
}

// Defaults of the file. The packages that use a value fall back to the
// same constant when a caller leaves it zero, so that a zero means the
// same in the file, in a Config built by hand and in a package.
const (
	DefaultListen          = ":8080"
	DefaultLogFormat       = "text"
	DefaultLogLevel        = "info"
	DefaultRedisPrefix     = "parley:"
	DefaultOutboxMaxAge    = 10 * time.Minute
	DefaultSkillBodyBudget = 16 * 1024
)

// Defaults of the server: section.
const (
	DefaultReadHeaderTimeout   = 10 * time.Second
	DefaultReadTimeout         = 15 * time.Second
	DefaultWriteTimeout        = 30 * time.Second
	DefaultIdleTimeout         = 60 * time.Second
	DefaultMaxConcurrentBodies = 32
)

// Default returns the configuration used when no file and no environment
// say otherwise, with the default section of every registered platform
// and tool section.
func Default() Config {
	home := "~/.parley"
	if h, err := os.UserHomeDir(); err == nil {
		home = filepath.Join(h, ".parley")
	}
	wd, _ := os.Getwd()
	c := Config{
		Listen:    DefaultListen,
		Home:      home,
		Workspace: wd,
		Log:       Log{Format: DefaultLogFormat, Level: DefaultLogLevel},
		Redis:     Redis{Prefix: DefaultRedisPrefix},
		Server: Server{
			ReadHeaderTimeout:   DefaultReadHeaderTimeout,
			ReadTimeout:         DefaultReadTimeout,
			WriteTimeout:        DefaultWriteTimeout,
			IdleTimeout:         DefaultIdleTimeout,
			MaxConcurrentBodies: DefaultMaxConcurrentBodies,
		},
		Outbox:    Outbox{MaxAge: DefaultOutboxMaxAge},
		Skills:    Skills{BodyBudget: DefaultSkillBodyBudget},
		Admin:     Admin{Listen: DefaultAdminListen, SessionTTL: DefaultAdminSessionTTL},
		Sections:  map[string]SectionConfig{},
		Tools:     map[string]SectionConfig{},
		Platforms: map[string]PlatformConfig{},
	}
	for _, s := range Sections() {
		c.Sections[s.Name] = s.NewConfig()
	}
	for _, s := range ToolSections() {
		c.Tools[s.Name] = s.NewConfig()
	}
	for _, p := range Platforms() {
		if p.NewConfig != nil {
			c.Platforms[p.Name] = p.NewConfig()
		}
	}
	return c
}

// Load reads path (empty: PARLEY_CONFIG, else no file), applies the
// environment from getenv and validates. getenv is a parameter so tests do
// not touch the process environment.
//
// Every problem names its key, and its line when the file sets the key:
// `line 12: model.timeout: "10" is not a duration (like 30s or 2m)`. See
// LoadWithWarnings for what is suspect but not wrong.
func Load(path string, getenv func(string) string) (Config, error) {
	cfg, _, err := LoadWithWarnings(path, getenv)
	return cfg, err
}

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}

// env binds the environment variables of the core keys.
func (c *Config) env() []EnvVar {
	return []EnvVar{
		Env("PARLEY_LISTEN", &c.Listen),
		Env("PARLEY_METRICS_LISTEN", &c.Server.MetricsListen),
		Env("PARLEY_HOME", &c.Home),
		Env("PARLEY_WORKSPACE", &c.Workspace),
		Env("PARLEY_LOG_FORMAT", &c.Log.Format),
		Env("PARLEY_LOG_LEVEL", &c.Log.Level),
		Env("REDIS_URL", &c.Redis.URL),
		Env("PARLEY_ADMIN_LISTEN", &c.Admin.Listen),
		Env("PARLEY_ADMIN_TOKEN", &c.Admin.Token),
		{Name: "PARLEY_SKILL_BODY_BUDGET", field: &c.Skills.BodyBudget, set: func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("PARLEY_SKILL_BODY_BUDGET: %q is not a whole number of bytes", v)
			}
			c.Skills.BodyBudget = n
			return nil
		}},
	}
}

// envVars is every binding of c: the core keys', then each section's.
func (c *Config) envVars() []EnvVar {
	vars := c.env()
	for _, s := range Sections() {
		if sec, ok := c.Sections[s.Name]; ok && sec != nil {
			vars = append(vars, sec.Env()...)
		}
	}
	for _, s := range ToolSections() {
		if sec, ok := c.Tools[s.Name]; ok && sec != nil {
			vars = append(vars, sec.Env()...)
		}
	}
	for _, p := range Platforms() {
		if sec, ok := c.Platforms[p.Name]; ok && sec != nil {
			vars = append(vars, sec.Env()...)
		}
	}
	return vars
}

// EnvVars lists every environment variable Parley reads, the registered
// platforms' and tool sections' included, for the checks that deployment files name only
// variables that exist.
func EnvVars() []string {
	c := Default()
	names := []string{"PARLEY_CONFIG"}
	for _, v := range c.envVars() {
		names = append(names, v.Name)
	}
	slices.Sort(names)
	return names
}

func applyEnv(c *Config, getenv func(string) string) error {
	for _, v := range c.envVars() {
		if val := getenv(v.Name); val != "" {
			if err := v.Set(val); err != nil {
				return err
			}
		}
	}
	return nil
}

// Validate checks every value and returns all problems at once, each naming
// its key.
func (c Config) Validate() error {
	if errs := c.problems(); len(errs) > 0 {
		return errors.New("invalid config: " + strings.Join(errs, "; "))
	}
	return nil
}

// problems lists every problem of c, each "key: what is wrong".
func (c Config) problems() []string {
	var errs []string
	bad := func(key, format string, args ...any) {
		errs = append(errs, key+": "+fmt.Sprintf(format, args...))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port", c.Listen)
	}
	if c.Server.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.Server.MetricsListen); err != nil {
			bad("server.metrics_listen", "%q is not host:port", c.Server.MetricsListen)
		} else if c.Server.MetricsListen == c.Listen {
			bad("server.metrics_listen", "must differ from listen")
		}
	}
	for _, t := range []struct {
		key string
		d   time.Duration
	}{{"server.read_header_timeout", c.Server.ReadHeaderTimeout}, {"server.read_timeout", c.Server.ReadTimeout},
		{"server.write_timeout", c.Server.WriteTimeout}, {"server.idle_timeout", c.Server.IdleTimeout}} {
		if t.d <= 0 {
			bad(t.key, "must be positive")
		}
	}
	if c.Server.MaxConcurrentBodies < 1 {
		bad("server.max_concurrent_bodies", "must be at least 1")
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", "%q must be text or json", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q must be debug, info, warn or error", c.Log.Level)
	}
	if c.Skills.BodyBudget <= 0 {
		bad("skills.body_budget", "must be greater than 0, got %d", c.Skills.BodyBudget)
	}
	if c.Outbox.MaxAge <= 0 {
		bad("outbox.max_age", "must be a positive duration such as 30s")
	}
	if c.Redis.URL != "" {
		if u, err := url.Parse(c.Redis.URL.Reveal()); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix") {
			bad("redis.url", "must be a redis://, rediss:// or unix:// URL")
		}
	}
	if c.Redis.Prefix == "" {
		bad("redis.prefix", "must not be empty")
	}
	errs = append(errs, c.Admin.validate()...)
	errs = append(errs, c.validateSections()...)
	errs = append(errs, c.validateTools()...)
	errs = append(errs, c.validatePlatforms()...)
	return errs
}

// YAML renders the configuration as the file format, each secret as
// <secret> (see Secret): what `parley config check` prints.
func (c Config) YAML() ([]byte, error) {
	return yaml.Marshal(c)
}

// Format implements fmt.Formatter: whatever the verb, a Config prints as
// `parley config check` shows it, secrets masked. (fmt's own rendering of
// the sections behind Platforms would bypass their Secret fields' methods
// for verbs such as %s.)
func (c Config) Format(f fmt.State, _ rune) {
	out, err := c.YAML()
	if err != nil {
		fmt.Fprintf(f, "%%!(config: %v)", err)
		return
	}
	f.Write(out)
}

// MarshalYAML implements yaml.Marshaler: the core keys, the tool
// sections under tools:, then each platform's section under its name.
// Every string that is a URL is shown through MaskURL, whatever its field's
// type: a base URL, an MCP server's URL or one of its arguments may carry a
// password or token in its userinfo or query as well as REDIS_URL does.
func (c Config) MarshalYAML() (any, error) {
	var doc yaml.Node
	if err := doc.Encode(c.document().Interface()); err != nil {
		return nil, err
	}
	maskURLs(&doc)
	return &doc, nil
}

// maskURLs masks the credentials of every URL among the scalars of n.
func maskURLs(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		n.Value = MaskURL(n.Value)
	}
	for _, c := range n.Content {
		maskURLs(c)
	}
}
