package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/mcp"
	"github.com/parleyhq/parley/agent/web"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
)

// mcpStartWait bounds how long serve and chat wait for the MCP servers'
// first connection before they go on: a server that is slow or down does
// not hold Parley up. It keeps connecting in the background, and its tools
// are offered from the moment it has listed them.
const mcpStartWait = 20 * time.Second

// defaultListWait is how long `parley tools list` and `parley policy
// explain` give the MCP servers to answer.
const defaultListWait = 10 * time.Second

// toolset is every tool one process offers — the skill tools, the web
// tools and the configured MCP servers' tools — in one registry, with the
// MCP servers behind some of them.
type toolset struct {
	registry *agent.Registry
	mcp      *mcp.Manager
	servers  map[string]mcp.ServerConfig // tools.mcp.servers
}

// toolOptions shape openTools.
type toolOptions struct {
	// skill are the skill tools (load_skill, …), built by the caller.
	skill []agent.Tool
	// metrics, when set, gets parley_mcp_server_up and the tool series
	// primed for channels.
	metrics  *metrics.Metrics
	channels []string
	log      *slog.Logger
	// wait bounds the MCP servers' first connection.
	wait time.Duration
}

// openTools registers every tool of cfg in a new registry and starts the
// MCP servers, waiting at most opts.wait for their first connection. The
// caller closes the toolset, which stops the servers; on error nothing is
// left running.
func (e *environment) openTools(cfg config.Config, opts toolOptions) (*toolset, error) {
	reg := agent.NewRegistry()
	webTools, err := web.Tools(web.FromConfig(cfg), web.Deps{Logger: opts.log})
	if err != nil {
		return nil, err
	}
	for _, t := range slices.Concat(opts.skill, webTools) {
		if err := reg.Register(t); err != nil {
			return nil, err
		}
	}
	mcpCfg := mcp.FromConfig(cfg)
	var onState func(mcp.ServerState)
	if opts.metrics != nil {
		opts.metrics.PrimeTools(opts.channels, toolNames(reg))
		onState = observeServers(opts.metrics, opts.channels, mcpCfg)
	}
	mgr, err := mcp.New(mcpCfg, mcp.Options{Registry: reg, Log: opts.log, OnStateChange: onState, Getenv: e.getenv, Version: version, Metrics: opts.metrics})
	if err != nil {
		return nil, err
	}
	ts := &toolset{registry: reg, mcp: mgr, servers: mcpCfg.Servers}
	ctx, cancel := context.WithTimeout(e.ctx, opts.wait)
	defer cancel()
	if err := mgr.Start(ctx); err != nil {
		ts.close()
		return nil, err
	}
	return ts, nil
}

// observeServers sets parley_mcp_server_up of every configured server, at
// 0 until it connects, and primes the tool series of a server's tools
// when it connects (they are bounded by its configuration).
func observeServers(m *metrics.Metrics, channels []string, cfg mcp.Config) func(mcp.ServerState) {
	for name := range cfg.Servers {
		m.MCPServerUp.WithLabelValues(name).Set(0)
	}
	return func(s mcp.ServerState) {
		if !s.Up {
			m.MCPServerUp.WithLabelValues(s.Name).Set(0)
			return
		}
		names := make([]string, len(s.Tools))
		for i, t := range s.Tools {
			names[i] = t.Name
		}
		m.PrimeTools(channels, names)
		m.MCPServerUp.WithLabelValues(s.Name).Set(1)
	}
}

// close stops the MCP servers (stdio processes exit, calls in flight are
// cancelled) and unregisters their tools.
func (ts *toolset) close() error { return ts.mcp.Close() }

// down names the MCP servers that are not connected, for readiness.
func (ts *toolset) down() []string {
	var out []string
	for _, s := range ts.mcp.Servers() {
		if !s.Up {
			out = append(out, s.Name)
		}
	}
	return out
}

func toolNames(reg *agent.Registry) []string {
	var names []string
	for _, t := range reg.All() {
		names = append(names, t.Name())
	}
	return names
}

// sourced is implemented by tools that say where they come from (MCP
// tools: "mcp:SERVER"); the others are builtin.
type sourced interface{ Source() string }

func toolSource(t agent.Tool) string {
	if s, ok := t.(sourced); ok {
		return s.Source()
	}
	return policy.SourceBuiltin
}

// toolRow is one line of `parley tools list`.
type toolRow struct {
	Name   string `json:"name"`
	Source string `json:"source"` // builtin or mcp:SERVER
	// Class is read or write; empty for a server that listed no tools.
	Class string `json:"class,omitempty"`
	// ClassRule is what decided an MCP tool's class (readOnlyHint, a
	// read or write glob, or the default).
	ClassRule string `json:"class_rule,omitempty"`
	// ServerState is up or down for an MCP server's tools, empty for
	// builtin tools; ServerError says why a server is down.
	ServerState string `json:"server_state,omitempty"`
	ServerError string `json:"server_error,omitempty"`
}

// rows lists every tool, then a placeholder SERVER__* for each MCP server
// that has no tools to show (down, or listing none).
func (ts *toolset) rows() []toolRow {
	servers := ts.mcp.Servers()
	states := map[string]mcp.ServerState{}
	rules := map[string]string{}
	for _, s := range servers {
		states[s.Name] = s
		for _, t := range s.Tools {
			rules[t.Name] = t.Rule
		}
	}
	var rows []toolRow
	listed := map[string]bool{}
	for _, t := range ts.registry.All() {
		r := toolRow{Name: t.Name(), Source: toolSource(t), Class: className(t.Writes())}
		if server, ok := strings.CutPrefix(r.Source, "mcp:"); ok {
			r.ClassRule = rules[r.Name]
			r.ServerState, r.ServerError = serverState(states[server])
			listed[server] = true
		}
		rows = append(rows, r)
	}
	for _, s := range servers {
		if listed[s.Name] {
			continue
		}
		r := toolRow{Name: s.Name + "__*", Source: "mcp:" + s.Name, ClassRule: ts.servers[s.Name].ClassRules()}
		r.ServerState, r.ServerError = serverState(s)
		if s.Up {
			r.ServerError = "the server lists no tools"
		}
		rows = append(rows, r)
	}
	return rows
}

func className(writes bool) string {
	if writes {
		return "write"
	}
	return "read"
}

func serverState(s mcp.ServerState) (state, reason string) {
	if s.Up {
		return "up", ""
	}
	return "down", s.Err
}

// toolsCLI is `parley tools list [--json]`: every tool this configuration
// offers, with its source, class and server state, as seen by connecting
// to the MCP servers now.
func (e *environment) toolsCLI(args []string) error {
	if len(args) == 0 || args[0] != "list" {
		return fmt.Errorf("%w: parley tools list [--config FILE] [--json] [--wait D]", errUsage)
	}
	fs := newFlagSet("tools list", e.stderr)
	path := configFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	wait := fs.Duration("wait", defaultListWait, "how long to wait for the MCP servers to answer")
	cfg, err := e.parseAndLoad(fs, path, args[1:])
	if err != nil {
		return err
	}
	ts, err := e.cliTools(cfg, *wait)
	if err != nil {
		return err
	}
	defer ts.close()
	rows := ts.rows()
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Tools   []toolRow         `json:"tools"`
			Servers []mcp.ServerState `json:"servers"`
		}{rows, ts.mcp.Servers()})
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tSOURCE\tCLASS\tCLASS RULE\tSERVER STATE")
	for _, r := range rows {
		state := r.ServerState
		if r.ServerError != "" {
			state += ": " + r.ServerError
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Source, dash(r.Class), dash(r.ClassRule), dash(state))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(ts.servers) > 0 {
		fmt.Fprintf(e.stdout, "\nMCP servers as this command found them, waiting at most %s; policies decide per channel which of these a conversation is offered (parley policy explain).\n", *wait)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cliTools opens the tools of cfg for a command that lists them without
// running a bot: the skill tools as a bot registers them, no metrics, no
// log, the MCP servers given at most wait to answer. The caller closes it.
func (e *environment) cliTools(cfg config.Config, wait time.Duration) (*toolset, error) {
	skill := agent.NewSkillTools(agent.SkillToolsConfig{Home: cfg.Home}, nil, nil).Tools()
	return e.openTools(cfg, toolOptions{skill: skill, log: slog.New(slog.DiscardHandler), wait: wait})
}

// policyTools describes every tool for `parley policy explain`, and what
// it could not learn: an MCP server that did not answer is shown as
// SERVER__*, once as a read and once as a write tool, decided by the same
// rules as its tools will be, with a note giving its class rules.
func (ts *toolset) policyTools() (tools []policy.ToolInfo, notes []string) {
	for _, s := range ts.mcp.Servers() {
		if s.Up && len(s.Tools) > 0 {
			notes = append(notes, fmt.Sprintf("MCP server %s is up: its %d tools are listed with the class each has (parley tools list shows why).", s.Name, len(s.Tools)))
		}
	}
	for _, r := range ts.rows() {
		if r.Class != "" {
			tools = append(tools, policy.ToolInfo{Name: r.Name, Writes: r.Class == "write", Source: r.Source})
			continue
		}
		tools = append(tools,
			policy.ToolInfo{Name: r.Name, Source: r.Source},
			policy.ToolInfo{Name: r.Name, Writes: true, Source: r.Source})
		notes = append(notes, fmt.Sprintf("MCP server %s is %s (%s): its tools are shown as %s by class; rules naming single tools apply once it lists them. Class rules: %s.",
			strings.TrimPrefix(r.Source, "mcp:"), r.ServerState, r.ServerError, r.Name, r.ClassRule))
	}
	return tools, notes
}
