// Package mcp connects Parley to MCP (Model Context Protocol) servers and
// offers their tools to the agent, on the official Go SDK.
//
// Each configured server (tools.mcp.servers.NAME) is either a stdio server,
// a command Parley starts and owns, or a streamable HTTP endpoint. A Manager
// supervises them: it connects, registers each server's tools in an
// agent.Registry as NAME__TOOL, follows notifications/tools/list_changed,
// and reconnects with backoff when a connection or a process ends. While a
// server is down its tools stay registered but report themselves
// unavailable (agent.Availability), so the model is not offered tools that
// cannot run.
//
// Every tool is a read or a write tool (agent.Tool.Writes), so channel
// policies decide MCP tools exactly like builtin ones: readOnlyHint makes a
// read tool, anything else writes, and the server's read/write globs
// override both. Results are text: at most 16 KiB, with images, audio and
// binary resources described rather than dropped.
//
// Secrets given as ${NAME} in a server's URL, headers or env are expanded
// only when connecting, and are redacted from every error, state and log
// line the package produces.
package mcp

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/retry"
)

// Options wires a Manager to the rest of Parley.
type Options struct {
	// Registry receives the servers' tools. Required.
	Registry *agent.Registry
	// Log gets the servers' events, with "component": "mcp" and "server".
	// Nil logs nothing.
	Log *slog.Logger
	// OnStateChange is called after a server connects, goes down or is
	// stopped, with its new state: feed parley_mcp_server_up{server} and
	// readiness from it. It runs on the server's own goroutine, so one
	// server's states arrive in order; it must not block for long.
	OnStateChange func(ServerState)
	// Getenv resolves ${NAME} and the variables stdio servers inherit;
	// nil means os.Getenv.
	Getenv func(string) string
	// Version is sent to servers as the client's version ("dev" if empty).
	Version string
	// Metrics counts the servers' reconnects under parley_reconnects_total
	// {integration="mcp"}; nil counts into a private registry.
	Metrics *metrics.Metrics
	// Elicitor answers the servers' questions (elicitation/create); nil
	// declines every one.
	Elicitor Elicitor
	// OnProgress receives the servers' progress notifications for calls in
	// flight, with the call's context: feed the live status from it. It
	// runs on the connection's goroutine and must not block.
	OnProgress func(context.Context, Progress)
	// Tokens keeps the OAuth sign-ins of servers with an oauth: section,
	// shared by every replica (RedisTokens); nil keeps them in this
	// process only, lost at exit.
	Tokens TokenStore
	// SignIn, when set, lets the Manager run an authorization code
	// sign-in itself: it is shown the authorization URL and returns the
	// redirect's code and state. `parley mcp login` and the conformance
	// harness set it; serve does not (a server waits for an operator's
	// login, down with the reason).
	SignIn auth.AuthorizationCodeFetcher
}

// Integration is the integration label of the servers' reconnects.
const Integration = "mcp"

// ServerState is what an operator needs to know about one server.
type ServerState struct {
	Name      string `json:"name"`
	Transport string `json:"transport"` // TransportStdio or TransportHTTP
	Up        bool   `json:"up"`
	// Err is why the server is down, secrets redacted; empty while up.
	Err string `json:"error,omitempty"`
	// SignIn, for a server signed in with OAuth, says why it needs an
	// operator's sign-in (none yet, lapsed, more scopes wanted) and how:
	// `parley mcp login NAME`. Empty while its sign-in works.
	SignIn string `json:"sign_in,omitempty"`
	// Since is when Up last changed.
	Since time.Time `json:"since"`
	// Connects counts successful connections; more than one means the
	// server was restarted or reconnected.
	Connects int `json:"connects"`
	// Tools are the tools offered, sorted by name, kept while the server
	// is down (they are unavailable then).
	Tools []ToolState `json:"tools"`
	// Skipped are tools the server lists that are not offered, and why.
	Skipped []SkippedTool `json:"skipped,omitempty"`
}

// ToolState describes one offered tool.
type ToolState struct {
	// Name is what the model calls: SERVER__TOOL, made valid.
	Name string `json:"name"`
	// Original is the server's own name for the tool.
	Original string `json:"original"`
	Writes   bool   `json:"writes"`
	// Rule is what decided the class: `write "glob"`, `read "glob"`,
	// "readOnlyHint", "readOnlyHint, trust_annotations",
	// "readOnlyHint: false" or "default: no readOnlyHint".
	Rule string `json:"rule"`
	// ReadClaimed is true for a tool that is read only by the server's
	// readOnlyHint, on a server not marked trust_annotations: a scope with
	// tools.write: false does not offer it.
	ReadClaimed bool `json:"read_claimed,omitempty"`
}

// SkippedTool is a listed tool that is not offered (tools.allow/deny
// excludes are not listed: the operator chose those).
type SkippedTool struct {
	Original string `json:"original"`
	Reason   string `json:"reason"`
}

// timing holds the Manager's waits; tests shorten or gate them.
type timing struct {
	backoff retry.Backoff                                   // between connection attempts
	starts  int                                             // attempts Start waits for
	stable  time.Duration                                   // up this long: the next wait starts short again
	connect time.Duration                                   // bounds starting, initialising and the first tools/list
	grace   time.Duration                                   // after closing stdin, and again after SIGTERM
	sleep   func(ctx context.Context, d time.Duration) bool // retry.Sleep
	// signInPoll is how often a server waiting for a sign-in looks for one
	// in the token store during its backoff.
	signInPoll time.Duration
}

func defaultTiming(r retry.Config) timing {
	r = r.Or(DefaultRetry)
	return timing{
		backoff: r.Backoff(),
		starts:  r.MaxAttempts,
		stable:  time.Minute,
		// npx may download the server on its first start.
		connect: time.Minute,
		grace:   2 * time.Second,
		sleep:   retry.Sleep,
		// A Redis GET per server waiting for a sign-in, per replica.
		signInPoll: 2 * time.Second,
	}
}

// Manager supervises the configured MCP servers. Create it with New, then
// Start it once and Close it once.
type Manager struct {
	registry   *agent.Registry
	log        *slog.Logger
	onState    func(ServerState)
	getenv     func(string) string
	version    string
	metrics    *metrics.Metrics
	elicitor   Elicitor
	onProgress func(context.Context, Progress)
	tokens     TokenStore
	signIn     auth.AuthorizationCodeFetcher
	timing     timing
	servers    []*server // sorted by name

	// ctx lives until Close: the servers' goroutines and every call in
	// flight end with it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	started bool
	closed  bool
}

// Errors returned by New and Start.
var (
	ErrNoRegistry = errors.New("mcp: Options.Registry is required")
	ErrStarted    = errors.New("mcp: manager already started or closed")
)

// New validates cfg (its errors name keys under tools.mcp) and returns a
// Manager for its servers. Nothing is
// started until Start.
func New(cfg Config, opts Options) (*Manager, error) {
	if err := config.PrefixKeys(config.ToolsKey+"."+Section, cfg.Validate()); err != nil {
		return nil, err
	}
	if opts.Registry == nil {
		return nil, ErrNoRegistry
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.New()
	}
	m := &Manager{
		registry:   opts.Registry,
		log:        opts.Log.With("component", "mcp"),
		onState:    opts.OnStateChange,
		getenv:     opts.Getenv,
		version:    opts.Version,
		metrics:    opts.Metrics,
		elicitor:   opts.Elicitor,
		onProgress: opts.OnProgress,
		tokens:     opts.Tokens,
		signIn:     opts.SignIn,
		timing:     defaultTiming(cfg.Retry),
	}
	if m.tokens == nil {
		m.tokens = &MemoryTokens{}
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	for _, name := range slices.Sorted(maps.Keys(cfg.Servers)) {
		m.servers = append(m.servers, newServer(m, name, cfg.Servers[name].withDefaults()))
	}
	return m, nil
}

// Start connects every server in the background and returns once each has
// connected (its tools registered) or failed tools.mcp.retry.max_attempts
// times (once by default), or when ctx ends. A server that fails does not
// stop the others or Parley: it is down, with the reason in Servers, and
// is retried with backoff (tools.mcp.retry.base doubling to
// tools.mcp.retry.max: about 1 s to about 1 min) until Close. A server that hangs while connecting may hold Start
// for up to a minute (npx may be downloading it): bound ctx to bound the
// wait; the servers keep connecting in the background either way.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started || m.closed {
		m.mu.Unlock()
		return ErrStarted
	}
	m.started = true
	m.mu.Unlock()

	readies := make([]chan struct{}, len(m.servers))
	for i, s := range m.servers {
		readies[i] = make(chan struct{})
		ready := sync.OnceFunc(func() { close(readies[i]) })
		m.wg.Go(func() { s.run(m.ctx, ready) })
	}
	for _, ready := range readies {
		select {
		case <-ready:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// Close stops every server and returns when all are gone: calls in flight
// are cancelled, sessions closed, stdio servers asked to exit (stdin
// closed), then sent SIGTERM, then SIGKILL, along with anything they
// started; every goroutine the Manager started has returned, and its tools
// are unregistered. Close is idempotent.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	for _, s := range m.servers {
		s.unregister()
	}
	return nil
}

// Servers returns the state of every configured server, sorted by name.
func (m *Manager) Servers() []ServerState {
	out := make([]ServerState, len(m.servers))
	for i, s := range m.servers {
		out[i] = s.state()
	}
	return out
}
