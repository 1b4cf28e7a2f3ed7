// Package toolsource is the contract between the binary and the packages
// that offer tools beyond the skill tools (the web tools, the MCP
// servers), as channels.Opener is for the chat platforms: each package
// registers a Source from its init function, and `parley serve`, `parley
// tools list` and `parley policy explain` open every registered source
// without naming one.
package toolsource

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/metrics"
	"github.com/redis/go-redis/v9"
)

// Source is one package's tools.
type Source struct {
	// Name is the source's name, e.g. "mcp"; sources open in name order.
	Name string
	// Part names what may be down in the source, for readiness: "MCP
	// server". Empty for a source whose tools are always there.
	Part string
	// Open registers the source's tools of c (its sections under tools:)
	// in deps.Registry and starts what serves them, waiting at most
	// deps.Wait for a first connection. The caller closes what it returns;
	// on error nothing is left running.
	Open func(ctx context.Context, c config.Config, deps Deps) (Opened, error)
	// Warnings, when set, names what is suspect in the source's sections
	// of c, for `parley config check`, which opens nothing: a variable a
	// server needs that getenv does not have. Nil: nothing.
	Warnings func(c config.Config, getenv func(string) string) []string
	// Names, when set, is what the source would offer with c, known
	// without opening it, so that config check can tell a policy's typo
	// from a tool. Nil: no tools.
	Names func(c config.Config) Names
	// UsesRedis, when set, reports whether the source keeps state of c in
	// the deployment's Redis (the MCP servers' OAuth sign-ins), so that a
	// command that opens it without running a bot connects to Redis too.
	UsesRedis func(c config.Config) bool
}

// UsesRedis reports whether any registered source keeps state of c in the
// deployment's Redis (see Source.UsesRedis).
func UsesRedis(c config.Config) bool {
	for _, s := range Sources() {
		if s.UsesRedis != nil && s.UsesRedis(c) {
			return true
		}
	}
	return false
}

// Names is the tools a source offers, as far as they are known before it
// is opened.
type Names struct {
	// Tools are the names of tools known by their configuration.
	Tools []string
	// Prefixes begin the names of tools known only once what serves them
	// answers ("gh__" for an MCP server's), in order.
	Prefixes []string
}

// Warnings lists the warnings of every registered source about c, in
// source order (see Source.Warnings).
func Warnings(c config.Config, getenv func(string) string) []string {
	var out []string
	for _, s := range Sources() {
		if s.Warnings != nil {
			out = append(out, s.Warnings(c, getenv)...)
		}
	}
	return out
}

// KnownNames gathers the Names of every registered source, its tools
// sorted and its prefixes in source order.
func KnownNames(c config.Config) Names {
	var all Names
	for _, s := range Sources() {
		if s.Names != nil {
			n := s.Names(c)
			all.Tools = append(all.Tools, n.Tools...)
			all.Prefixes = append(all.Prefixes, n.Prefixes...)
		}
	}
	slices.Sort(all.Tools)
	return all
}

// Deps is what the process shares with every source it opens.
type Deps struct {
	// Registry receives the tools. Never nil.
	Registry *agent.Registry
	// Metrics, when set, gets the source's series; nil for a command that
	// runs no bot.
	Metrics *metrics.Metrics
	Log     *slog.Logger
	// Getenv resolves ${NAME} references and the environment of a
	// process the source starts.
	Getenv  func(string) string
	Version string
	// Wait bounds the first connection of what the source connects to.
	Wait time.Duration
	// Redis is the deployment's shared Redis, with the key prefix every
	// key starts with: the MCP servers' OAuth sign-ins live there, for
	// every replica. Nil without Redis.
	Redis       redis.UniversalClient
	RedisPrefix string
	// Hooks are what the gateway offers the sources beyond tools: a relay
	// of a tool server's questions to the chat (mcp.Elicitor), a sink for
	// calls' progress (func(context.Context, mcp.Progress)). Each source
	// takes the ones whose type it knows and ignores the rest, so this
	// package names none of them.
	Hooks []any
}

// Row is one line of `parley tools list` and of the console's tools.
type Row struct {
	Name   string `json:"name"`
	Source string `json:"source"` // builtin or e.g. mcp:SERVER
	// Class is read or write; empty for a placeholder of a part that
	// listed no tools.
	Class string `json:"class,omitempty"`
	// ClassRule is what decided the tool's class (readOnlyHint, a read or
	// write glob, or the default).
	ClassRule string `json:"class_rule,omitempty"`
	// ReadClaimed is true for a read tool whose class is only its source's
	// claim (agent.ClaimedClass): a scope with tools.write: false does not
	// offer it. For a placeholder, it says the part's read tools are.
	ReadClaimed bool `json:"read_claimed,omitempty"`
	// ServerState is up or down for a tool of a part that may be down,
	// empty for the others; ServerError says why a part is down.
	ServerState string `json:"server_state,omitempty"`
	ServerError string `json:"server_error,omitempty"`
	// Note explains a placeholder row to `parley policy explain`.
	Note string `json:"-"`
}

// Opened is an opened source.
type Opened interface {
	// Close stops what Open started and unregisters its tools.
	Close() error
	// Down names the parts that are not connected now, for readiness.
	Down() []string
	// Annotate completes r, the row of a tool of the registry, when the
	// tool is the source's: its class rule and its part's state.
	Annotate(r *Row)
	// Placeholders are rows for the parts none of rows (the registry's
	// tools) belongs to (down, or listing none), each with its Note.
	Placeholders(rows []Row) []Row
	// Notes say what `parley policy explain` should know of the source
	// beyond its rows.
	Notes() []string
	// AfterList is what `parley tools list` prints after its table, for
	// a list that waited at most wait; "" prints nothing.
	AfterList(wait time.Duration) string
	// State is what `parley tools list --json` shows of the source beside
	// the tools, under key; key "" shows nothing.
	State() (key string, v any)
}

// sources holds the registered sources. Like config's registries it is
// written only from init functions, and read-only afterwards.
var sources = map[string]Source{}

// Register adds s to the sources every process opens. Call it from the
// package's init function. It panics on an empty or duplicate name or a
// missing Open, since each is a programming error.
func Register(s Source) {
	if s.Name == "" || s.Open == nil {
		panic("toolsource: a source needs a name and Open")
	}
	if _, dup := sources[s.Name]; dup {
		panic("toolsource: source " + s.Name + " registered twice")
	}
	sources[s.Name] = s
}

// Sources returns every registered source, sorted by name.
func Sources() []Source {
	out := make([]Source, 0, len(sources))
	for _, name := range slices.Sorted(maps.Keys(sources)) {
		out = append(out, sources[name])
	}
	return out
}
