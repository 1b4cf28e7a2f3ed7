// Command conformance is the client under test of the MCP conformance
// suite (@modelcontextprotocol/conformance, `conformance client`): a
// small program over package mcp, the client Parley runs, so that the
// suite measures what `parley serve` does. It is not part of the parley
// binary; .ci/run builds and runs it.
//
// The suite starts it once per scenario, naming the scenario in
// MCP_CONFORMANCE_SCENARIO, passing the scenario's context (client
// credentials) as JSON in MCP_CONFORMANCE_CONTEXT and the server's URL as
// the last argument. It connects a Manager to that one server, as
// tools.mcp.servers.conformance, and calls the tools the scenario expects
// through the agent's registry. It exits 0 when every step worked.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/mcp"
)

// server is the name the server under test is configured as.
const server = "conformance"

// scenarioCalls are the tools each scenario's server expects called, with
// their arguments; a scenario not named calls none (it checks the
// handshake, or the authorization before it).
var scenarioCalls = map[string][]toolCall{
	"tools_call":                          {{"add_numbers", `{"a":5,"b":3}`}},
	"elicitation-sep1034-client-defaults": {{"test_client_elicitation_defaults", `{}`}},
	"sse-retry":                           {{"test_reconnection", `{}`}},
}

type toolCall struct{ name, args string }

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if err := run(log, os.Getenv("MCP_CONFORMANCE_SCENARIO"), os.Getenv("MCP_CONFORMANCE_CONTEXT"), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, scenario, scenarioContext string, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: conformance SERVER_URL (with MCP_CONFORMANCE_SCENARIO set)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	cfg, err := serverConfig(args[len(args)-1], scenario, scenarioContext)
	if err != nil {
		return err
	}
	reg := agent.NewRegistry()
	opts := mcp.Options{Registry: reg, Log: log, Elicitor: acceptDefaults{}, Version: "conformance"}
	if err := withOAuth(ctx, &opts, cfg); err != nil {
		return err
	}
	m, err := mcp.New(mcp.Config{Servers: map[string]mcp.ServerConfig{server: cfg}}, opts)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.Start(ctx); err != nil {
		return err
	}
	st := m.Servers()[0]
	if !st.Up {
		return fmt.Errorf("server down: %s", st.Err)
	}
	calls := scenarioCalls[scenario]
	if strings.HasPrefix(scenario, "auth/") {
		calls = []toolCall{{"test-tool", `{}`}}
	}
	for _, c := range calls {
		if err := callTool(ctx, reg, c); err != nil {
			return err
		}
	}
	return nil
}

func callTool(ctx context.Context, reg *agent.Registry, c toolCall) error {
	name := server + "__" + strings.ReplaceAll(c.name, "-", "_")
	tool, ok := reg.Get(name)
	if !ok {
		tool, ok = reg.Get(server + "__" + c.name)
	}
	if !ok {
		var have []string
		for _, t := range reg.All() {
			have = append(have, t.Name())
		}
		return fmt.Errorf("tool %s not offered; have %v", c.name, have)
	}
	tc := &agent.TurnContext{Channel: "conformance", Conversation: "c", User: "operator"}
	if _, err := tool.Call(ctx, tc, json.RawMessage(c.args)); err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	return nil
}

// acceptDefaults answers every question by accepting the form's defaults:
// an empty answer, which the client completes with each property's
// default.
type acceptDefaults struct{}

func (acceptDefaults) Elicit(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return &mcp.ElicitResult{Action: mcp.ElicitAccept, Content: map[string]any{}}, nil
}
