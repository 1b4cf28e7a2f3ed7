package mcp

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley/agent/toolsource"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/metrics"
)

func init() {
	toolsource.Register(toolsource.Source{Name: Section, Part: "MCP server", Open: openSource, Warnings: envWarnings, Names: names,
		UsesRedis: func(c config.Config) bool { return UsesOAuth(FromConfig(c)) }})
}

// envWarnings names the variables the servers refer to as ${NAME} that
// are not set: those servers cannot connect. serve starts without them
// too, with the server down, so config check warns rather than refuses.
func envWarnings(c config.Config, getenv func(string) string) []string {
	var out []string
	servers := FromConfig(c).Servers
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		var missing []string
		for _, v := range (Config{Servers: map[string]ServerConfig{name: servers[name]}}).EnvVars() {
			if getenv(v) == "" {
				missing = append(missing, v)
			}
		}
		if len(missing) > 0 {
			out = append(out, fmt.Sprintf("tools.mcp.servers.%s: environment variable %s is not set; the server stays down until it is", name, strings.Join(missing, ", ")))
		}
	}
	return out
}

// names is a prefix per server (SERVER__): its tools are only known once
// it answers, which config check does not wait for.
func names(c config.Config) toolsource.Names {
	var n toolsource.Names
	for _, s := range slices.Sorted(maps.Keys(FromConfig(c).Servers)) {
		n.Prefixes = append(n.Prefixes, s+"__")
	}
	return n
}

// UsesOAuth reports whether a server of c signs in with OAuth.
func UsesOAuth(c Config) bool {
	for _, s := range c.Servers {
		if s.OAuth != nil {
			return true
		}
	}
	return false
}

// source is the configured MCP servers as the binary sees them.
type source struct {
	mgr     *Manager
	servers map[string]ServerConfig // tools.mcp.servers
}

// openSource starts the servers of tools.mcp, waiting at most deps.Wait
// for their first connection: a server that is slow or down keeps
// connecting in the background, its tools offered once it has listed
// them.
func openSource(ctx context.Context, c config.Config, deps toolsource.Deps) (toolsource.Opened, error) {
	cfg := FromConfig(c)
	var onState func(ServerState)
	if deps.Metrics != nil {
		onState = observeServers(deps.Metrics, cfg)
	}
	opts := Options{Registry: deps.Registry, Log: deps.Log, OnStateChange: onState, Getenv: deps.Getenv, Version: deps.Version, Metrics: deps.Metrics}
	for _, h := range deps.Hooks {
		switch h := h.(type) {
		case Elicitor:
			opts.Elicitor = h
		case func(context.Context, Progress):
			opts.OnProgress = h
		}
	}
	if deps.Redis != nil {
		opts.Tokens = RedisTokens{Client: deps.Redis, Prefix: deps.RedisPrefix}
	} else if UsesOAuth(cfg) && deps.Log != nil {
		deps.Log.Warn("mcp: REDIS_URL is not set: OAuth sign-ins of MCP servers are kept in this process only, and `parley mcp login` cannot reach it")
	}
	mgr, err := New(cfg, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, deps.Wait)
	defer cancel()
	if err := mgr.Start(ctx); err != nil {
		mgr.Close()
		return nil, err
	}
	return &source{mgr: mgr, servers: cfg.Servers}, nil
}

// observeServers sets parley_mcp_server_up of every configured server, at
// 0 until it connects. The series of its tools are made by their first
// call (and deleted by the Manager when the server stops listing one).
func observeServers(m *metrics.Metrics, cfg Config) func(ServerState) {
	for name := range cfg.Servers {
		m.MCPServerUp.WithLabelValues(name).Set(0)
	}
	return func(s ServerState) {
		if !s.Up {
			m.MCPServerUp.WithLabelValues(s.Name).Set(0)
			return
		}
		m.MCPServerUp.WithLabelValues(s.Name).Set(1)
	}
}

// Close stops the servers (stdio processes exit, calls in flight are
// cancelled) and unregisters their tools.
func (s *source) Close() error { return s.mgr.Close() }

// Down names the servers that are not connected.
func (s *source) Down() []string {
	var out []string
	for _, st := range s.mgr.Servers() {
		switch {
		case st.Up:
		case st.SignIn != "":
			// Readiness and the console say what the operator must do.
			out = append(out, st.Name+" (needs sign-in: "+st.SignIn+")")
		default:
			out = append(out, st.Name)
		}
	}
	return out
}

// Annotate gives the row of a server's tool its class rule and the
// server's state.
func (s *source) Annotate(r *toolsource.Row) {
	server, ok := strings.CutPrefix(r.Source, "mcp:")
	if !ok {
		return
	}
	var state ServerState
	for _, st := range s.mgr.Servers() {
		if st.Name == server {
			state = st
		}
		for _, t := range st.Tools {
			if t.Name == r.Name {
				r.ClassRule, r.ReadClaimed = t.Rule, t.ReadClaimed
			}
		}
	}
	r.ServerState, r.ServerError = serverState(state)
}

// Placeholders lists SERVER__* for each server none of rows is a tool of.
func (s *source) Placeholders(rows []toolsource.Row) []toolsource.Row {
	listed := map[string]bool{}
	for _, r := range rows {
		if server, ok := strings.CutPrefix(r.Source, "mcp:"); ok {
			listed[server] = true
		}
	}
	var out []toolsource.Row
	for _, st := range s.mgr.Servers() {
		if listed[st.Name] {
			continue
		}
		cfg := s.servers[st.Name]
		// Its read tools are read by their hints alone unless the
		// operator trusts them or names some in read.
		r := toolsource.Row{Name: st.Name + "__*", Source: "mcp:" + st.Name, ClassRule: cfg.ClassRules(),
			ReadClaimed: !cfg.TrustAnnotations && len(cfg.Read) == 0}
		r.ServerState, r.ServerError = serverState(st)
		if st.Up {
			r.ServerError = "the server lists no tools"
		}
		r.Note = fmt.Sprintf("MCP server %s is %s (%s): its tools are shown as %s by class; rules naming single tools apply once it lists them. Class rules: %s.",
			st.Name, r.ServerState, r.ServerError, r.Name, r.ClassRule)
		out = append(out, r)
	}
	return out
}

// Notes says which servers are up with the tools they list.
func (s *source) Notes() []string {
	var notes []string
	for _, st := range s.mgr.Servers() {
		if st.Up && len(st.Tools) > 0 {
			notes = append(notes, fmt.Sprintf("MCP server %s is up: its %d tools are listed with the class each has (parley tools list shows why).", st.Name, len(st.Tools)))
		}
	}
	return notes
}

// AfterList says, when servers are configured, that the list is what
// they answered within wait.
func (s *source) AfterList(wait time.Duration) string {
	if len(s.servers) == 0 {
		return ""
	}
	return fmt.Sprintf("MCP servers as this command found them, waiting at most %s; policies decide per channel which of these a conversation is offered (parley policy explain).", wait)
}

// State is every server's state, under "servers".
func (s *source) State() (string, any) { return "servers", s.mgr.Servers() }

func serverState(s ServerState) (state, reason string) {
	if s.Up {
		return "up", ""
	}
	return "down", s.Err
}
