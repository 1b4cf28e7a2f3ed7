// Package config loads Parley's one YAML file, applies the environment
// overrides that DESIGN.md lists, and validates the result. Every error names
// the key it is about, so an operator can fix a file without reading code.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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

	Log      Log      `yaml:"log"`
	Model    Model    `yaml:"model"`
	Redis    Redis    `yaml:"redis"`
	Sessions Sessions `yaml:"sessions"`
	Gateway  Gateway  `yaml:"gateway"`
	Skills   Skills   `yaml:"skills"`
	Policies Policies `yaml:"policies"`

	Slack  Slack  `yaml:"slack"`
	Feishu Feishu `yaml:"feishu"`
	WeChat WeChat `yaml:"wechat"`
}

// Log selects the slog handler.
type Log struct {
	Format string `yaml:"format"` // text or json (PARLEY_LOG_FORMAT)
	Level  string `yaml:"level"`  // debug, info, warn, error
}

// Model is the OpenAI-compatible endpoint and the agent loop's limits.
type Model struct {
	BaseURL           string        `yaml:"base_url"`
	APIKey            string        `yaml:"api_key"`
	Name              string        `yaml:"name"`
	Timeout           time.Duration `yaml:"timeout"`
	MaxRetries        int           `yaml:"max_retries"`
	MaxToolIterations int           `yaml:"max_tool_iterations"`
	MaxTokens         int           `yaml:"max_tokens"`
	SystemPrompt      string        `yaml:"system_prompt"`
}

// Redis is the shared store. An empty URL means the in-memory store.
type Redis struct {
	URL    string `yaml:"url"`
	Prefix string `yaml:"prefix"`
}

// Sessions bounds what one conversation may hold.
type Sessions struct {
	HistoryTTL      time.Duration `yaml:"history_ttl"`
	MaxMessages     int           `yaml:"max_messages"`
	MaxMessageChars int           `yaml:"max_message_chars"`
	LockTTL         time.Duration `yaml:"lock_ttl"`
	QueueLimit      int           `yaml:"queue_limit"`
	CompactTokens   int           `yaml:"compact_tokens"`
	KeepRounds      int           `yaml:"keep_rounds"`
}

// Gateway sizes the worker pool and the shutdown drain.
type Gateway struct {
	Workers         int           `yaml:"workers"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
}

// Skills configures the skill layers' budgets.
type Skills struct {
	BodyBudget int `yaml:"body_budget"` // bytes of injections kept in one history
}

// Slack holds the Slack app's credentials and conversation rules.
type Slack struct {
	BotToken      string `yaml:"bot_token"`
	SigningSecret string `yaml:"signing_secret"`
	AppToken      string `yaml:"app_token"`
	APIURL        string `yaml:"api_url"`
	// FollowThreads continues a thread the bot answered without a new
	// mention (needs the channels:history / groups:history scopes).
	FollowThreads bool `yaml:"follow_threads"`
	// Command is the registered slash command, e.g. /parley.
	Command string `yaml:"command"`
}

// Feishu holds the Feishu/Lark app's credentials.
type Feishu struct {
	AppID             string `yaml:"app_id"`
	AppSecret         string `yaml:"app_secret"`
	VerificationToken string `yaml:"verification_token"`
	EncryptKey        string `yaml:"encrypt_key"`
	BaseURL           string `yaml:"base_url"`
	Domain            string `yaml:"domain"` // feishu or lark
	Mode              string `yaml:"mode"`   // "" (long connection and webhook) or webhook
	// ReplyInThread answers a mention in a normal group inside a thread
	// of that message (reply_in_thread), making the thread the conversation.
	ReplyInThread bool `yaml:"reply_in_thread"`
	// FollowThreads continues a thread the bot answered without a new
	// mention (needs the group-message scope).
	FollowThreads bool `yaml:"follow_threads"`
}

// WeChat holds the iLink and WeCom settings.
type WeChat struct {
	ILinkBaseURL string `yaml:"ilink_base_url"`
	WeComBotID   string `yaml:"wecom_bot_id"`
	WeComSecret  string `yaml:"wecom_bot_secret"`
	WeComWSURL   string `yaml:"wecom_ws_url"`
	// ChunkChars is the size of one message of a split answer; phones
	// read short messages better than one wall of text.
	ChunkChars int `yaml:"chunk_chars"`
}

// Default returns the configuration used when no file and no environment
// say otherwise.
func Default() Config {
	home := "~/.parley"
	if h, err := os.UserHomeDir(); err == nil {
		home = filepath.Join(h, ".parley")
	}
	wd, _ := os.Getwd()
	return Config{
		Listen:    ":8080",
		Home:      home,
		Workspace: wd,
		Log:       Log{Format: "text", Level: "info"},
		Model: Model{
			BaseURL:           "https://api.openai.com/v1",
			Name:              "gpt-4o-mini",
			Timeout:           60 * time.Second,
			MaxRetries:        3,
			MaxToolIterations: 8,
		},
		Redis: Redis{Prefix: "parley:"},
		Sessions: Sessions{
			HistoryTTL:      7 * 24 * time.Hour,
			MaxMessages:     200,
			MaxMessageChars: 8000,
			LockTTL:         15 * time.Second,
			QueueLimit:      50,
			CompactTokens:   24000,
			KeepRounds:      4,
		},
		Gateway: Gateway{Workers: 16, ShutdownTimeout: 30 * time.Second},
		Skills:  Skills{BodyBudget: 16 * 1024},
		Slack:   Slack{FollowThreads: true, Command: "/parley", APIURL: "https://slack.com/api/"},
		Feishu:  Feishu{Domain: "feishu", ReplyInThread: true, FollowThreads: true},
		WeChat: WeChat{
			ILinkBaseURL: "https://ilinkai.weixin.qq.com",
			WeComWSURL:   "wss://openws.work.weixin.qq.com",
			ChunkChars:   600,
		},
	}
}

// Load reads path (empty: PARLEY_CONFIG, else no file), applies the
// environment from getenv and validates. getenv is a parameter so tests do
// not touch the process environment.
func Load(path string, getenv func(string) string) (Config, error) {
	cfg := Default()
	if path == "" {
		path = getenv("PARLEY_CONFIG")
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("config: %w", err)
		}
		if err := decode(data, &cfg); err != nil {
			return cfg, fmt.Errorf("config %s: %w", path, err)
		}
	}
	if err := applyEnv(&cfg, getenv); err != nil {
		return cfg, err
	}
	cfg.Home = expandHome(cfg.Home)
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func decode(data []byte, cfg *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file is a valid, empty config
		}
		return cleanYAMLError(err)
	}
	return nil
}

// cleanYAMLError rewrites yaml.v3's "field x not found in type config.Y" into
// words an operator recognises, keeping the line number.
func cleanYAMLError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		if i := strings.Index(e, "field "); i >= 0 && strings.Contains(e, " not found in type ") {
			key := strings.TrimPrefix(e[i:], "field ")
			key = key[:strings.Index(key, " not found")]
			e = e[:i] + "unknown key " + strconv.Quote(key)
		}
		msgs = append(msgs, strings.TrimPrefix(e, "yaml: "))
	}
	return errors.New(strings.Join(msgs, "; "))
}

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}

// envString lists the string overrides: variable → field.
func envStrings(c *Config) map[string]*string {
	return map[string]*string{
		"PARLEY_LISTEN":             &c.Listen,
		"PARLEY_HOME":               &c.Home,
		"PARLEY_WORKSPACE":          &c.Workspace,
		"PARLEY_LOG_FORMAT":         &c.Log.Format,
		"PARLEY_LOG_LEVEL":          &c.Log.Level,
		"OPENAI_API_KEY":            &c.Model.APIKey,
		"OPENAI_BASE_URL":           &c.Model.BaseURL,
		"PARLEY_MODEL":              &c.Model.Name,
		"REDIS_URL":                 &c.Redis.URL,
		"SLACK_BOT_TOKEN":           &c.Slack.BotToken,
		"SLACK_SIGNING_SECRET":      &c.Slack.SigningSecret,
		"SLACK_APP_TOKEN":           &c.Slack.AppToken,
		"SLACK_API_URL":             &c.Slack.APIURL,
		"FEISHU_APP_ID":             &c.Feishu.AppID,
		"FEISHU_APP_SECRET":         &c.Feishu.AppSecret,
		"FEISHU_VERIFICATION_TOKEN": &c.Feishu.VerificationToken,
		"FEISHU_ENCRYPT_KEY":        &c.Feishu.EncryptKey,
		"FEISHU_BASE_URL":           &c.Feishu.BaseURL,
		"FEISHU_MODE":               &c.Feishu.Mode,
		"WECHAT_ILINK_BASE_URL":     &c.WeChat.ILinkBaseURL,
		"WECOM_BOT_ID":              &c.WeChat.WeComBotID,
		"WECOM_BOT_SECRET":          &c.WeChat.WeComSecret,
		"WECOM_WS_URL":              &c.WeChat.WeComWSURL,
	}
}

// EnvVars lists every environment variable Parley reads, for the checks
// that deployment files name only variables that exist.
func EnvVars() []string {
	var c Config
	names := []string{"PARLEY_CONFIG", "PARLEY_SKILL_BODY_BUDGET"}
	for name := range envStrings(&c) {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func applyEnv(c *Config, getenv func(string) string) error {
	for name, field := range envStrings(c) {
		if v := getenv(name); v != "" {
			*field = v
		}
	}
	if v := getenv("PARLEY_SKILL_BODY_BUDGET"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("PARLEY_SKILL_BODY_BUDGET: %q is not a whole number of bytes", v)
		}
		c.Skills.BodyBudget = n
	}
	return nil
}

// Validate checks every value and returns all problems at once, each naming
// its key.
func (c Config) Validate() error {
	var errs []string
	bad := func(key, format string, args ...any) {
		errs = append(errs, key+": "+fmt.Sprintf(format, args...))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port", c.Listen)
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
	if u, err := url.Parse(c.Model.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("model.base_url", "%q is not an http(s) URL", c.Model.BaseURL)
	}
	if c.Model.Name == "" {
		bad("model.name", "must not be empty")
	}
	positive := []struct {
		key string
		v   int
	}{
		{"model.max_tool_iterations", c.Model.MaxToolIterations},
		{"sessions.max_messages", c.Sessions.MaxMessages},
		{"sessions.max_message_chars", c.Sessions.MaxMessageChars},
		{"sessions.queue_limit", c.Sessions.QueueLimit},
		{"sessions.compact_tokens", c.Sessions.CompactTokens},
		{"sessions.keep_rounds", c.Sessions.KeepRounds},
		{"gateway.workers", c.Gateway.Workers},
		{"skills.body_budget", c.Skills.BodyBudget},
		{"wechat.chunk_chars", c.WeChat.ChunkChars},
	}
	for _, p := range positive {
		if p.v <= 0 {
			bad(p.key, "must be greater than 0, got %d", p.v)
		}
	}
	if c.Model.MaxRetries < 0 {
		bad("model.max_retries", "must not be negative")
	}
	if c.Model.MaxTokens < 0 {
		bad("model.max_tokens", "must not be negative")
	}
	durations := []struct {
		key string
		v   time.Duration
	}{
		{"model.timeout", c.Model.Timeout},
		{"sessions.history_ttl", c.Sessions.HistoryTTL},
		{"sessions.lock_ttl", c.Sessions.LockTTL},
		{"gateway.shutdown_timeout", c.Gateway.ShutdownTimeout},
	}
	for _, d := range durations {
		if d.v <= 0 {
			bad(d.key, "must be a positive duration such as 30s")
		}
	}
	if c.Sessions.LockTTL > 0 && c.Sessions.LockTTL < time.Second {
		bad("sessions.lock_ttl", "must be at least 1s so renewals can keep up")
	}
	if c.Redis.URL != "" {
		if u, err := url.Parse(c.Redis.URL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix") {
			bad("redis.url", "must be a redis://, rediss:// or unix:// URL")
		}
	}
	if c.Redis.Prefix == "" {
		bad("redis.prefix", "must not be empty")
	}
	switch c.Feishu.Domain {
	case "", "feishu", "lark":
	default:
		bad("feishu.domain", "%q must be feishu or lark", c.Feishu.Domain)
	}
	switch c.Feishu.Mode {
	case "", "webhook", "websocket":
	default:
		bad("feishu.mode", "%q must be webhook or websocket", c.Feishu.Mode)
	}
	if err := c.Policies.validate(); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return errors.New("invalid config: " + strings.Join(errs, "; "))
	}
	return nil
}

// RequireModelKey reports a one-line error naming OPENAI_API_KEY when the
// configured endpoint is a hosted service, which always needs a key; local
// servers (Ollama, vLLM on loopback or a private network) usually do not.
func (c Config) RequireModelKey() error {
	if c.Model.APIKey != "" {
		return nil
	}
	u, err := url.Parse(c.Model.BaseURL)
	if err != nil {
		return nil // Validate already names the bad URL
	}
	if isLocalHost(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("OPENAI_API_KEY is not set; %s needs an API key (set it, or point OPENAI_BASE_URL at a local server)", u.Host)
}

func isLocalHost(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".local") || strings.HasSuffix(host, ".localhost") || !strings.Contains(host, ".") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsPrivate())
}

const masked = "********"

// Masked returns a copy with every secret replaced, for printing.
func (c Config) Masked() Config {
	m := c
	for _, s := range []*string{&m.Model.APIKey, &m.Slack.BotToken, &m.Slack.SigningSecret, &m.Slack.AppToken,
		&m.Feishu.AppSecret, &m.Feishu.VerificationToken, &m.Feishu.EncryptKey, &m.WeChat.WeComSecret} {
		if *s != "" {
			*s = masked
		}
	}
	if u, err := url.Parse(m.Redis.URL); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			m.Redis.URL = u.String()
		}
	}
	return m
}

// YAML renders the configuration as the file format.
func (c Config) YAML() ([]byte, error) {
	return yaml.Marshal(c)
}
