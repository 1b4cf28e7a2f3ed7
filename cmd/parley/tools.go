package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/parleyhq/parley/agent"
	agentfiles "github.com/parleyhq/parley/agent/files"
	"github.com/parleyhq/parley/agent/toolsource"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
	"github.com/redis/go-redis/v9"
)

// startWait bounds how long serve and chat wait for the tool sources'
// first connection (the MCP servers') before they go on: a server that is slow or down does
// not hold Parley up. It keeps connecting in the background, and its tools
// are offered from the moment it has listed them.
const startWait = 20 * time.Second

// defaultListWait is how long `parley tools list` and `parley policy
// explain` give the tool sources (the MCP servers) to answer.
const defaultListWait = 10 * time.Second

// toolset is every tool one process offers — the skill tools and those of
// every registered tool source (toolsource.Register: the web tools, the
// MCP servers) — in one registry, with the sources behind them.
type toolset struct {
	registry *agent.Registry
	sources  []toolsource.Opened
	parts    []string // each source's Part, by index
	// closeRedis closes the Redis client cliTools opened, after the
	// sources; nil when none.
	closeRedis func() error
}

// toolOptions shape openTools.
type toolOptions struct {
	// skill are the skill tools (load_skill, …), built by the caller.
	skill []agent.Tool
	// metrics, when set, gets the sources' series.
	metrics *metrics.Metrics
	log     *slog.Logger
	// wait bounds the sources' first connection.
	wait time.Duration
	// redis is the deployment's shared Redis (the MCP servers' OAuth
	// sign-ins); nil without one.
	redis redis.UniversalClient
	// hooks reach the sources (toolsource.Deps.Hooks): the relay of a
	// tool server's questions and progress to the chat.
	hooks []any
}

// openTools registers every tool of cfg in a new registry and opens every
// registered tool source, each waiting at most opts.wait for its first
// connection. The caller closes the toolset, which stops the sources; on
// error nothing is left running.
func (e *environment) openTools(cfg config.Config, opts toolOptions) (*toolset, error) {
	ts := &toolset{registry: agent.NewRegistry()}
	for _, t := range opts.skill {
		if err := ts.registry.Register(t); err != nil {
			return nil, err
		}
	}
	deps := toolsource.Deps{Registry: ts.registry, Metrics: opts.metrics, Log: opts.log,
		Getenv: e.getenv, Version: version, Wait: opts.wait, Redis: opts.redis, RedisPrefix: cfg.Redis.Prefix, Hooks: opts.hooks}
	for _, src := range toolsource.Sources() {
		opened, err := src.Open(e.ctx, cfg, deps)
		if err != nil {
			ts.close()
			return nil, err
		}
		ts.sources = append(ts.sources, opened)
		ts.parts = append(ts.parts, src.Part)
	}
	return ts, nil
}

// close stops every source (an MCP server's process exits, calls in
// flight are cancelled) and unregisters their tools.
func (ts *toolset) close() error {
	var errs []error
	for _, s := range ts.sources {
		errs = append(errs, s.Close())
	}
	if ts.closeRedis != nil {
		errs = append(errs, ts.closeRedis())
	}
	return errors.Join(errs...)
}

// down names the parts of the sources that are not connected, for
// readiness and the console.
func (ts *toolset) down() []string {
	var out []string
	for _, s := range ts.sources {
		out = append(out, s.Down()...)
	}
	return out
}

// downParts describes each part that is down as readiness says it: "MCP
// server NAME".
func (ts *toolset) downParts() []string {
	var out []string
	for i, s := range ts.sources {
		for _, name := range s.Down() {
			out = append(out, strings.TrimSpace(ts.parts[i]+" "+name))
		}
	}
	return out
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
type toolRow = toolsource.Row

// rows lists every tool, then a placeholder (SERVER__*) for each part of a
// source that has no tools to show (down, or listing none).
func (ts *toolset) rows() []toolRow {
	var rows []toolRow
	for _, t := range ts.registry.All() {
		r := toolRow{Name: t.Name(), Source: toolSource(t), Class: className(t.Writes()), ReadClaimed: agent.ReadClaimed(t)}
		if agent.Sends(t) {
			r.Class = "send" // send_file: neither a read nor a write
		}
		for _, s := range ts.sources {
			s.Annotate(&r)
		}
		rows = append(rows, r)
	}
	listed := rows
	for _, s := range ts.sources {
		rows = append(rows, s.Placeholders(listed)...)
	}
	return rows
}

func className(writes bool) string {
	if writes {
		return "write"
	}
	return "read"
}

// toolsJSON is `parley tools list --json`: the tools, then what each
// source shows beside them (the MCP servers' states), in that order.
func (ts *toolset) toolsJSON(rows []toolRow) ([]byte, error) {
	parts := [][2]any{{"tools", rows}}
	for _, s := range ts.sources {
		if key, v := s.State(); key != "" {
			parts = append(parts, [2]any{key, v})
		}
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(p[0])
		v, err := json.Marshal(p[1])
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
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
		out, err := ts.toolsJSON(rows)
		if err != nil {
			return err
		}
		_, err = e.stdout.Write(out)
		return err
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
	for _, s := range ts.sources {
		if after := s.AfterList(*wait); after != "" {
			fmt.Fprintf(e.stdout, "\n%s\n", after)
		}
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
	skill := append(agent.NewSkillTools(agent.SkillToolsConfig{Home: cfg.Home}, nil, nil).Tools(), agentfiles.SendFile{})
	opts := toolOptions{skill: skill, log: slog.New(slog.DiscardHandler), wait: wait}
	// A server signed in with OAuth is reached with the sign-in the
	// replicas share, kept in Redis.
	var client redis.UniversalClient
	if cfg.Redis.URL != "" && toolsource.UsesRedis(cfg) {
		var err error
		if client, err = sessions.OpenRedis(e.ctx, cfg.Redis.URL.Reveal(), 2); err != nil {
			return nil, fmt.Errorf("redis, which keeps the MCP servers' sign-ins: %w", err)
		}
		opts.redis = client
	}
	ts, err := e.openTools(cfg, opts)
	if client != nil {
		if err != nil {
			client.Close()
		} else {
			ts.closeRedis = client.Close
		}
	}
	return ts, err
}

// policyTools describes every tool for `parley policy explain`, and what
// it could not learn: an MCP server that did not answer is shown as
// SERVER__*, once as a read and once as a write tool, decided by the same
// rules as its tools will be, with a note giving its class rules.
func (ts *toolset) policyTools() (tools []policy.ToolInfo, notes []string) {
	for _, s := range ts.sources {
		notes = append(notes, s.Notes()...)
	}
	for _, r := range ts.rows() {
		if r.Class != "" {
			tools = append(tools, policy.ToolInfo{Name: r.Name, Writes: r.Class == "write", Sends: r.Class == "send", Source: r.Source, ClassRule: r.ClassRule, ReadClaimed: r.ReadClaimed})
			continue
		}
		tools = append(tools,
			policy.ToolInfo{Name: r.Name, Source: r.Source, ClassRule: r.ClassRule, ReadClaimed: r.ReadClaimed},
			policy.ToolInfo{Name: r.Name, Writes: true, Source: r.Source, ClassRule: r.ClassRule})
		notes = append(notes, r.Note)
	}
	return tools, notes
}
