package mcp

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
)

// bothServers is a stdio server "local" and a streamable HTTP server
// "remote", each offering only its read tool lookup and its write tool
// save_note.
func bothServers(t *testing.T) Config {
	t.Helper()
	srv, _ := httpServer(t, testServerOptions{name: "remote"}, nil)
	only := ToolFilter{Allow: []string{"lookup", "save_*"}}
	local := stdioConfig("local")
	local.Tools = only
	return Config{Servers: map[string]ServerConfig{
		"local":  local,
		"remote": {URL: srv.URL, Tools: only},
	}}
}

// The model calls a read and a write tool of a stdio and of an HTTP server
// in one turn and gets every result, wrapped as untrusted data.
func TestAgentCallsToolsOfBothTransports(t *testing.T) {
	f := newFixture(t, bothServers(t), Options{})
	f.start(t)
	want := []string{"local__lookup", "local__save_note", "remote__lookup", "remote__save_note"}
	if got := f.names(); !slices.Equal(got, want) {
		t.Fatalf("registered %v, want %v", got, want)
	}
	md := newModel(t, f)
	md.srv.Script(
		openaitest.Tools(
			openaitest.Call("local__lookup", `{"key":"k1"}`),
			openaitest.Call("remote__lookup", `{"key":"k2"}`),
			openaitest.Call("local__save_note", `{"text":"n1"}`),
			openaitest.Call("remote__save_note", `{"text":"n2"}`),
		),
		openaitest.Text("done"),
	)
	res := md.run(t, context.Background(), "slack", "do it all", nil)
	if res.Reply != "done" {
		t.Fatalf("reply = %q", res.Reply)
	}
	if got := offeredTools(md.srv.Requests()[0]); !slices.Equal(got, want) {
		t.Errorf("offered %v, want %v", got, want)
	}
	results := toolResults(t, res)
	for name, content := range map[string]string{
		"local__lookup":     "local has k1",
		"remote__lookup":    "remote has k2",
		"local__save_note":  `local saved "n1"`,
		"remote__save_note": `remote saved "n2"`,
	} {
		if results[name] != content {
			t.Errorf("%s result = %q, want %q", name, results[name], content)
		}
		if got := toolCalls(t, md.m, "slack", name, metrics.OutcomeOK); got != 1 {
			t.Errorf("%s ok calls = %v, want 1", name, got)
		}
	}
	for _, s := range f.m.Servers() {
		if !s.Up || s.Connects != 1 || s.Err != "" {
			t.Errorf("state %+v, want up after one connect", s)
		}
	}
	if !strings.Contains(f.log.String(), "audit: mcp tool call") {
		t.Error("write tool calls were not audited")
	}
}

// Policies decide MCP tools like builtin ones: WeChat is offered only the
// read tools, and a forced call of a write tool is denied without running.
func TestWeChatGetsOnlyReadTools(t *testing.T) {
	f := newFixture(t, bothServers(t), Options{})
	f.start(t)
	resolver := policy.New(policy.Config{})
	allow := func(channel string) func(string) bool {
		eff := resolver.Resolve(policy.Scope{Channel: channel})
		return func(name string) bool {
			tool, ok := f.reg.Get(name)
			return eff.Tool(name, ok && tool.Writes()).Allowed
		}
	}
	md := newModel(t, f)

	md.srv.Script(openaitest.Text("hello"))
	md.run(t, context.Background(), "slack", "hi", allow("slack"))
	if got := offeredTools(md.srv.Requests()[0]); len(got) != 4 {
		t.Errorf("slack offered %v, want all four tools", got)
	}

	md.srv.Script(openaitest.Tools(openaitest.Call("remote__save_note", `{"text":"x"}`), openaitest.Call("local__lookup", `{"key":"k"}`)), openaitest.Text("answered"))
	res := md.run(t, context.Background(), "wechat", "save it", allow("wechat"))
	if got, want := offeredTools(md.srv.Requests()[1]), []string{"local__lookup", "remote__lookup"}; !slices.Equal(got, want) {
		t.Errorf("wechat offered %v, want %v", got, want)
	}
	results := toolResults(t, res)
	if !strings.Contains(results["remote__save_note"], "not available in this conversation") {
		t.Errorf("forced write call result = %q, want a refusal", results["remote__save_note"])
	}
	if results["local__lookup"] != "local has k" {
		t.Errorf("read call result = %q", results["local__lookup"])
	}
	if got := toolCalls(t, md.m, "wechat", "remote__save_note", metrics.OutcomeDenied); got != 1 {
		t.Errorf("denied calls = %v, want 1", got)
	}
	if res.Reply != "answered" {
		t.Errorf("reply = %q", res.Reply)
	}
}
