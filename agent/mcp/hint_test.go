package mcp

import (
	"context"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/agent/mcp/mcptest"
)

// A server's explicit readOnlyHint: false is labelled as such, apart from
// a tool that has no annotations at all.
func TestExplicitReadOnlyHintFalseLabelled(t *testing.T) {
	s := mcptest.New("hints")
	sdk.AddTool(s, &sdk.Tool{Name: "delete", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: false}},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return mcptest.Text("deleted"), nil, nil
		})
	f := newFixture(t, Config{Servers: map[string]ServerConfig{"h": {URL: httptestServe(t, s)}}}, Options{})
	f.start(t)
	rules := map[string]string{}
	for _, tl := range f.state(t, "h").Tools {
		rules[tl.Original] = tl.Rule
	}
	want := map[string]string{"delete": "readOnlyHint: false", mcptest.WriteTool: "default: no readOnlyHint", mcptest.ReadTool: "readOnlyHint"}
	for tool, rule := range want {
		if rules[tool] != rule {
			t.Errorf("%s: rule %q, want %q", tool, rules[tool], rule)
		}
	}
}
