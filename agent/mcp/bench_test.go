package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	openai "github.com/sashabaranov/go-openai"
)

// realisticServer serves ten tools shaped like a code-hosting server's:
// a sentence or two of description and three to five typed parameters.
func realisticServer(tb testing.TB) string {
	tb.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "bench", Version: "v1"}, nil)
	prop := func(typ, desc string) map[string]any { return map[string]any{"type": typ, "description": desc} }
	repo := map[string]any{"owner": prop("string", "Repository owner (user or organisation)"), "repo": prop("string", "Repository name")}
	tools := []struct {
		name, desc string
		extra      map[string]any
		required   []string
		readOnly   bool
	}{
		{"get_issue", "Get the details of an issue in a repository, with its labels, assignees and state.", map[string]any{"issue_number": prop("integer", "The number of the issue")}, []string{"issue_number"}, true},
		{"list_issues", "List issues in a repository. Filter by state and labels; results are paginated.", map[string]any{"state": prop("string", "open, closed or all"), "labels": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Labels to filter by"}, "page": prop("integer", "Page number, from 1")}, nil, true},
		{"create_issue", "Create a new issue in a repository.", map[string]any{"title": prop("string", "Issue title"), "body": prop("string", "Issue body in Markdown"), "labels": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}, []string{"title"}, false},
		{"add_issue_comment", "Add a comment to an existing issue or pull request.", map[string]any{"issue_number": prop("integer", "Issue or pull request number"), "body": prop("string", "Comment text in Markdown")}, []string{"issue_number", "body"}, false},
		{"search_code", "Search for code across repositories with the code search syntax.", map[string]any{"query": prop("string", "Search query"), "page": prop("integer", "Page number")}, []string{"query"}, true},
		{"get_file_contents", "Get the contents of a file or a directory listing at a path and ref.", map[string]any{"path": prop("string", "Path in the repository"), "ref": prop("string", "Branch, tag or commit (default branch when empty)")}, []string{"path"}, true},
		{"create_pull_request", "Open a pull request from a head branch into a base branch.", map[string]any{"title": prop("string", "Title"), "head": prop("string", "Branch with the changes"), "base": prop("string", "Branch to merge into"), "body": prop("string", "Description")}, []string{"title", "head", "base"}, false},
		{"list_commits", "List commits of a branch, newest first.", map[string]any{"sha": prop("string", "Branch name or commit SHA"), "page": prop("integer", "Page number")}, nil, true},
		{"merge_pull_request", "Merge a pull request with the chosen method.", map[string]any{"pull_number": prop("integer", "Pull request number"), "merge_method": prop("string", "merge, squash or rebase")}, []string{"pull_number"}, false},
		{"get_pull_request_diff", "Get the diff of a pull request.", map[string]any{"pull_number": prop("integer", "Pull request number")}, []string{"pull_number"}, true},
	}
	for _, tl := range tools {
		props := map[string]any{}
		for k, v := range repo {
			props[k] = v
		}
		for k, v := range tl.extra {
			props[k] = v
		}
		schema := map[string]any{"type": "object", "properties": props, "required": append([]string{"owner", "repo"}, tl.required...)}
		s.AddTool(&sdk.Tool{Name: tl.name, Description: tl.desc, InputSchema: schema, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: tl.readOnly}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return text("ok"), nil })
	}
	return httpTestServer(tb, streamable(s))
}

// BenchmarkRequestSizeWithMCPServers measures what offering tools costs: the
// bytes of the chat completion request of a plain "hi" with three MCP
// servers of ten tools each, against the same request without them.
func BenchmarkRequestSizeWithMCPServers(b *testing.B) {
	cfg := Config{Servers: map[string]ServerConfig{}}
	for _, name := range []string{"github", "gitlab", "gitea"} {
		cfg.Servers[name] = ServerConfig{URL: realisticServer(b)}
	}
	f := newFixture(b, cfg, Options{})
	f.start(b)
	if n := len(f.names()); n != 30 {
		b.Fatalf("%d tools registered, want 30", n)
	}
	md := newModel(b, f)
	ctx := context.Background()
	md.run(b, ctx, "slack", "hi", nil)
	md.run(b, ctx, "slack", "hi", func(string) bool { return false }) // no tools offered
	raw := md.srv.RawRequests()
	with, without := len(raw[0]), len(raw[1])

	b.ReportAllocs()
	for b.Loop() {
		md.run(b, ctx, "slack", "hi", nil)
	}
	b.ReportMetric(float64(with), "request-bytes")
	b.ReportMetric(float64(with-without), "tool-bytes")
	b.Logf(`"hi" request: %d bytes with 3 MCP servers of 10 tools each, %d bytes without tools; the tools cost %d bytes (%d per tool)`,
		with, without, with-without, (with-without)/30)
}

// The system prompt stays byte-identical whatever the servers do: tools
// appearing, a server dying and coming back, tools going away. Only the
// tools array changes, and it is byte-identical again once the tools are.
func TestSystemPromptStaysByteIdentical(t *testing.T) {
	srv, s := httpServer(t, testServerOptions{name: "remote"}, nil)
	local := stdioConfig("local")
	local.Tools = ToolFilter{Allow: []string{"lookup", "save_note", "pid"}}
	f := newFixture(t, Config{Servers: map[string]ServerConfig{"remote": {URL: srv.URL, Tools: ToolFilter{Deny: []string{"*flood*", "garbage", "spawn"}}}, "local": local}}, Options{})
	waiting, release := gateSleep(f)
	defer release()
	f.start(t)
	md := newModel(t, f)
	ctx := context.Background()
	hi := func() { md.run(t, ctx, "slack", "hi", nil) }

	hi() // 0: everything
	addExtra(s)
	waitFor(t, "extra", func() bool { return f.available("remote__extra") })
	hi() // 1: one tool more
	out, err := f.call(t, ctx, "local__pid", "{}")
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(out)
	killProcess(t, pid)
	receive(t, waiting, "the backoff")
	hi() // 2: the stdio server is down
	release()
	waitFor(t, "the restart", func() bool { return f.available("local__lookup") })
	s.RemoveTools("extra")
	waitFor(t, "extra to go", func() bool { _, ok := f.reg.Get("remote__extra"); return !ok })
	hi() // 3: as at first

	reqs := md.srv.Requests()
	raws := md.srv.RawRequests()
	system := md.agent.SystemPrompt("")
	for i, req := range reqs {
		if req.Messages[0].Role != openai.ChatMessageRoleSystem || req.Messages[0].Content != system {
			t.Errorf("request %d: the system prompt changed", i)
		}
		for _, tool := range req.Tools {
			if strings.Contains(system, tool.Function.Name) {
				t.Errorf("the system prompt names the tool %s", tool.Function.Name)
			}
		}
	}
	count := func(i int, prefix string) int {
		n := 0
		for _, name := range offeredTools(reqs[i]) {
			if strings.HasPrefix(name, prefix) {
				n++
			}
		}
		return n
	}
	if got := fmt.Sprint(len(reqs[0].Tools), len(reqs[1].Tools), count(2, "local__"), count(3, "local__")); got != fmt.Sprint(len(reqs[0].Tools), len(reqs[0].Tools)+1, 0, 3) {
		t.Errorf("tools offered (first, after list_changed, local while down, local after restart) = %s", got)
	}
	if first, last := toolsJSON(t, raws[0]), toolsJSON(t, raws[3]); first != last {
		t.Errorf("the tools array differs once the tools are the same again:\n%s\n%s", first, last)
	}
}

// toolsJSON is the tools array of a raw request, as sent.
func toolsJSON(t *testing.T, raw []byte) string {
	t.Helper()
	var req map[string]json.RawMessage
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	return string(req["tools"])
}
