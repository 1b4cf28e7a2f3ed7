// Package mcptest provides real MCP servers, built with the official SDK,
// for Parley's tests: the same server over streamable HTTP (httptest) and
// over stdio, by the test binary re-executing itself. Each has a read tool
// and a write tool whose answers name the server, so a test can tell which
// server a result came from.
package mcptest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// EnvServe, set in the environment of the test binary, makes ServeStdio
// serve the MCP server it names instead of running the tests.
const EnvServe = "PARLEY_MCPTEST_SERVE"

// Tool names of the server New builds.
const (
	// ReadTool is lookup(key): readOnlyHint, so a read tool. It answers
	// "NAME has KEY".
	ReadTool = "lookup"
	// WriteTool is save_note(text): no hint, so a write tool. It answers
	// "NAME saved "TEXT"".
	WriteTool = "save_note"
)

// LookupArgs are lookup's arguments.
type LookupArgs struct {
	Key string `json:"key" jsonschema:"what to look up"`
}

// NoteArgs are save_note's arguments.
type NoteArgs struct {
	Text string `json:"text" jsonschema:"the note"`
}

// Text is a tool result holding s.
func Text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// New returns an MCP server called name with ReadTool and WriteTool.
// Tests add tools of their own with sdk.AddTool.
func New(name string) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "parley-test-" + name, Version: "v1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: ReadTool, Description: "Look a key up.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, a LookupArgs) (*sdk.CallToolResult, any, error) {
			return Text(fmt.Sprintf("%s has %s", name, a.Key)), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: WriteTool, Description: "Save a note."},
		func(_ context.Context, _ *sdk.CallToolRequest, a NoteArgs) (*sdk.CallToolResult, any, error) {
			return Text(fmt.Sprintf("%s saved %q", name, a.Text)), nil, nil
		})
	return s
}

// Handler serves s over streamable HTTP.
func Handler(s *sdk.Server) http.Handler {
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
}

// NewHTTP serves New(name) over streamable HTTP until the test ends.
func NewHTTP(t testing.TB, name string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(Handler(New(name)))
	t.Cleanup(srv.Close)
	return srv
}

// ServeStdio returns at once unless the process was started by a
// StdioCommand: then it serves that server on stdin and stdout until the
// client closes stdin, and exits. Call it first in TestMain.
func ServeStdio() {
	name := os.Getenv(EnvServe)
	if name == "" {
		return
	}
	if err := New(name).Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// StdioCommand is how to start the running test binary as the stdio
// server called name: the command, its arguments (no test runs) and the
// environment to add.
func StdioCommand(name string) (command string, args []string, env map[string]string) {
	return os.Args[0], []string{"-test.run=^$"}, map[string]string{
		EnvServe: name,
		// The race detector waits a second at exit by default.
		"GORACE": "atexit_sleep_ms=0",
	}
}
