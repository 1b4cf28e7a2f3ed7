package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/parleyhq/parley/agent/mcp/mcptest"
	"github.com/parleyhq/parley/config"
)

// The test binary doubles as a stdio MCP server: run with
// PARLEY_MCP_TEST_SERVER set, it serves the test tools on stdin/stdout and
// exits, so that the stdio tests run a real server built with the SDK, in
// a real child process.
const (
	envServerMode = "PARLEY_MCP_TEST_SERVER" // "serve" or "sleep"
	envServerName = "PARLEY_MCP_TEST_NAME"   // the server's name, echoed in results
	envStartMark  = "PARLEY_MCP_TEST_START"  // file written when hang starts
	envCancelMark = "PARLEY_MCP_TEST_MARK"   // file written when hang is cancelled
	envBadSchemas = "PARLEY_MCP_TEST_BAD"    // "1": list tools with invalid schemas
)

func TestMain(m *testing.M) {
	switch os.Getenv(envServerMode) {
	case "serve":
		os.Exit(serveStdio())
	case "sleep":
		// A grandchild that ignores stdin: it lives until it is killed.
		for {
			time.Sleep(time.Hour)
		}
	}
	os.Exit(m.Run())
}

func serveStdio() int {
	opts := testServerOptions{name: os.Getenv(envServerName), badSchemas: os.Getenv(envBadSchemas) == "1"}
	if mark := os.Getenv(envStartMark); mark != "" {
		opts.onStart = func() { _ = os.WriteFile(mark, []byte("started"), 0o600) }
	}
	if mark := os.Getenv(envCancelMark); mark != "" {
		opts.onCancel = func() { _ = os.WriteFile(mark, []byte("cancelled"), 0o600) }
	}
	if err := newTestServer(opts).Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "test server:", err)
		return 1
	}
	return 0
}

// testServerOptions shape the test server.
type testServerOptions struct {
	name string
	// onStart and onCancel are called when hang starts and when its
	// context is cancelled (the client's notifications/cancelled).
	onStart, onCancel func()
	// badSchemas adds tools whose listed input schemas are invalid.
	badSchemas bool
	// release, when closed, ends hang too (so that a test can always shut
	// its server down).
	release <-chan struct{}
}

type sizeArgs struct {
	Bytes int `json:"bytes" jsonschema:"how many bytes"`
}

var text = mcptest.Text

// newTestServer builds the server the tests talk to: mcptest's, whose
// lookup is a read tool (readOnlyHint) and save_note a write tool (no
// hint), and tools that misbehave on purpose.
func newTestServer(o testServerOptions) *sdk.Server {
	s := mcptest.New(o.name)
	sdk.AddTool(s, &sdk.Tool{Name: "hang", Description: "Never answers.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			if o.onStart != nil {
				o.onStart()
			}
			select {
			case <-ctx.Done():
			case <-o.release:
				return text("released"), nil, nil
			}
			if o.onCancel != nil {
				o.onCancel()
			}
			return nil, nil, ctx.Err()
		})
	sdk.AddTool(s, &sdk.Tool{Name: "big", Description: "Answers with many bytes.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, a sizeArgs) (*sdk.CallToolResult, any, error) {
			// Two-byte characters, so that a cut must find a boundary.
			return text(strings.Repeat("é", a.Bytes/2)), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Always fails.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "the widget is jammed"}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "media", Description: "Answers with every kind of content.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			size := int64(2048)
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "here you are"},
				&sdk.ImageContent{Data: make([]byte, 1500), MIMEType: "image/png"},
				&sdk.AudioContent{Data: make([]byte, 300<<10), MIMEType: "audio/wav"},
				&sdk.ResourceLink{URI: "file:///report.pdf", Name: "report", MIMEType: "application/pdf", Size: &size, Description: "the Q3 report"},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "embedded notes"}},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///blob.bin", MIMEType: "application/octet-stream", Blob: make([]byte, 100)}},
			}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "pid", Description: "Answers with the server's process id.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return text(strconv.Itoa(os.Getpid())), nil, nil
		})
	// The following write to the process's own stdout and stderr: they
	// only make sense over stdio.
	sdk.AddTool(s, &sdk.Tool{Name: "flood_stderr", Description: "Writes bytes to stderr, then answers.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, a sizeArgs) (*sdk.CallToolResult, any, error) {
			line := strings.Repeat("noise ", 30) + "\n"
			for n := 0; n < a.Bytes; n += len(line) {
				os.Stderr.WriteString(line)
			}
			return text("flooded"), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "flood_stdout", Description: "Writes bytes without a newline to stdout.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *sdk.CallToolRequest, a sizeArgs) (*sdk.CallToolResult, any, error) {
			// A message that never ends: the client must give up on it
			// rather than buffer it all.
			os.Stdout.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"`)
			chunk := strings.Repeat("x", 1<<16)
			for n := 0; n < a.Bytes; n += len(chunk) {
				if _, err := os.Stdout.WriteString(chunk); err != nil {
					break
				}
			}
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	sdk.AddTool(s, &sdk.Tool{Name: "garbage", Description: "Writes a line of its choice to stdout instead of an answer.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, a mcptest.NoteArgs) (*sdk.CallToolResult, any, error) {
			os.Stdout.WriteString(a.Text + "\n")
			return text("garbage written"), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "spawn", Description: "Starts a child process that never exits.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envServerMode+"=sleep")
			// It inherits stdout and stderr, as npx's node does.
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			if err := cmd.Start(); err != nil {
				return nil, nil, err
			}
			return text(strconv.Itoa(cmd.Process.Pid)), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "add_extra", Description: "Adds the tool extra, which notifies list_changed."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			addExtra(s)
			return text("added"), nil, nil
		})
	if o.badSchemas {
		addBadSchemaTools(s)
	}
	return s
}

// addExtra adds the read tool extra to s.
func addExtra(s *sdk.Server) {
	sdk.AddTool(s, &sdk.Tool{Name: "extra", Description: "Appeared later.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return text("extra here"), nil, nil
		})
}

// badSchemas are what a broken server may list as input schemas. The SDK
// refuses to register such tools, so a middleware rewrites the listing, as
// a server built otherwise would send it.
var badSchemas = map[string]any{
	"bad_string": "not a schema",
	"bad_array":  []any{1, 2},
	"bad_type":   map[string]any{"type": "string"},
	"bad_huge":   map[string]any{"type": "object", "description": strings.Repeat("d", maxSchema)},
	// Not invalid: a schema without a type is taken as an object.
	"untyped": map[string]any{"properties": map[string]any{"q": map[string]any{"type": "string"}}},
}

func addBadSchemaTools(s *sdk.Server) {
	for name := range badSchemas {
		sdk.AddTool(s, &sdk.Tool{Name: name, Description: "Has a schema of its own."},
			func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
				return text(name + " ran"), nil, nil
			})
	}
	s.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			res, err := next(ctx, method, req)
			if list, ok := res.(*sdk.ListToolsResult); ok && err == nil {
				for _, t := range list.Tools {
					if bad, ok := badSchemas[t.Name]; ok {
						c := *t
						c.InputSchema = bad
						*t = c
					}
				}
			}
			return res, err
		}
	})
}

// addEcho adds a tool called name that answers "echo NAME".
func addEcho(s *sdk.Server, name string) {
	sdk.AddTool(s, &sdk.Tool{Name: name, Description: "Echoes its name."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return text("echo " + name), nil, nil
		})
}

var streamable = mcptest.Handler

// httpServer serves newTestServer(o) over streamable HTTP. wrap, if set,
// wraps its handler (to check headers).
func httpServer(t testing.TB, o testServerOptions, wrap func(http.Handler) http.Handler) (*httptest.Server, *sdk.Server) {
	t.Helper()
	s := newTestServer(o)
	h := streamable(s)
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, s
}

// stdioConfig runs the test binary as the stdio server called name.
func stdioConfig(name string, env ...string) ServerConfig {
	cfg := ServerConfig{
		Command: os.Args[0],
		Args:    []string{"-test.run=^$"},
		// The race detector waits a second at exit by default.
		Env: map[string]config.SecretTemplate{envServerMode: "serve", envServerName: config.SecretTemplate(name), "GORACE": "atexit_sleep_ms=0"},
	}
	for i := 0; i+1 < len(env); i += 2 {
		cfg.Env[env[i]] = config.SecretTemplate(env[i+1])
	}
	return cfg
}

// args renders tool arguments.
func args(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
