package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/mcp/mcptest"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
	openai "github.com/sashabaranov/go-openai"
)

// The MCP tools every turn of the test below asks for: the read and the
// write tool of a stdio server (local) and of a streamable HTTP one
// (remote).
var e2eMCPCalls = []openaitest.ToolCall{
	openaitest.Call("local__"+mcptest.ReadTool, `{"key":"k1"}`),
	openaitest.Call("local__"+mcptest.WriteTool, `{"text":"n1"}`),
	openaitest.Call("remote__"+mcptest.ReadTool, `{"key":"k2"}`),
	openaitest.Call("remote__"+mcptest.WriteTool, `{"text":"n2"}`),
}

// toolCallingModel calls all four MCP tools whatever it is offered (on
// WeChat that forces calls of tools it was not offered), then answers with
// what the tools returned, one result a line.
func toolCallingModel(req openai.ChatCompletionRequest) openaitest.Step {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == openai.ChatMessageRoleUser {
		return openaitest.Tools(e2eMCPCalls...)
	}
	var results []string
	for _, m := range slices.Backward(req.Messages) {
		if m.Role != openai.ChatMessageRoleTool {
			break
		}
		name, content, _ := agent.UnwrapToolResult(m.Content)
		results = append(results, name+" => "+content)
	}
	slices.Sort(results)
	return openaitest.Text(strings.Join(results, "\n"))
}

// mcpProcesses returns the ids of the processes whose environment holds
// mark.
func mcpProcesses(t *testing.T, mark string) []int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/environ")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, d := range dirs {
		env, err := os.ReadFile(d)
		if err == nil && bytes.Contains(env, []byte(mark)) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			pids = append(pids, pid)
		}
	}
	return pids
}

// Done when of the tools issue: with a stdio MCP server and a streamable
// HTTP one configured, a Slack thread makes the model call a read and a
// write tool of each and get their results; the same request on WeChat is
// offered only the read tools, and the forced calls of the write tools are
// denied; `parley tools list` shows them all with their class, policy
// explain with the level deciding each, and `parley chat` gets them too. A third
// server that cannot be reached leaves serve running and ready, named in
// /readyz; the stdio server killed mid-session is restarted with its tools
// and the system prompt unchanged; stopping serve stops its process.
func TestMCPToolsOnSlackAndWeChatThroughServe(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("needs /proc to find the stdio server's process")
	}
	r := redistest.New(t)
	model := openaitest.New(t, openaitest.WithResponder(toolCallingModel))
	slack := slacktest.New(t)
	ilink := wechattest.NewILink(t)

	// The HTTP server wants the token the configuration names as ${VAR}.
	const token = "mcp-token-e2e-must-not-show"
	mcpHandler := mcptest.Handler(mcptest.New("remote"))
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, req)
	}))
	t.Cleanup(remote.Close)
	command, args, env := mcptest.StdioCommand("local")
	mark := "PARLEY_E2E_MARK=" + strconv.FormatInt(time.Now().UnixNano(), 36)
	env["PARLEY_E2E_MARK"] = strings.TrimPrefix(mark, "PARLEY_E2E_MARK=")
	envYAML, _ := json.Marshal(env)
	argsYAML, _ := json.Marshal(args)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  prefix: %q
gateway:
  shutdown_timeout: 10s
tools:
  mcp:
    servers:
      local:
        command: %q
        args: %s
        env: %s
        trust_annotations: true
      remote:
        url: %q
        read: [lookup]
        headers:
          Authorization: Bearer ${REMOTE_MCP_TOKEN}
      broken:
        url: http://%s/mcp
        timeout: 2s
`, r.Prefix, command, argsYAML, envYAML, remote.URL+"/mcp", freeAddr(t)))
	serveEnv := map[string]string{
		"PARLEY_CONFIG": cfg, "REDIS_URL": r.URL, "OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test",
		"PARLEY_HOME": t.TempDir(), "REMOTE_MCP_TOKEN": token,
		"SLACK_BOT_TOKEN": slacktest.BotToken, "SLACK_SIGNING_SECRET": slacktest.Secret, "SLACK_API_URL": slack.APIURL(),
		"WECHAT_ILINK_BASE_URL": ilink.URL(),
	}
	wechatLogin(t, serveEnv)
	s := startWeChatServe(t, serveEnv)
	waitFor(t, s.base+"/readyz", s.stderr)

	// The broken server does not stop serve, nor fail readiness: /readyz
	// names it, and its gauge says down while the others say up.
	status, body := get(t, s.base+"/readyz")
	if status != http.StatusOK || !strings.Contains(body, "degraded: MCP server broken is down") || strings.Contains(body, "local") || strings.Contains(body, "remote") {
		t.Errorf("/readyz = %d %q; want 200 naming only the broken server", status, body)
	}
	for server, want := range map[string]string{"local": "1", "remote": "1", "broken": "0"} {
		if got := metricOf(t, s.base, fmt.Sprintf(`parley_mcp_server_up{server=%q}`, server)); got != want {
			t.Errorf("parley_mcp_server_up{server=%q} = %q, want %s", server, got, want)
		}
	}
	if pids := mcpProcesses(t, mark); len(pids) != 1 {
		t.Fatalf("stdio server processes while serving: %v, want one", pids)
	}

	// Slack: every tool is offered and runs.
	const root = "1700000500.000100"
	body2, _ := json.Marshal(slacktest.Event("EvMCP1", slacktest.Mention("C1", "U1", root, "", "use the tools")))
	if code, resp := slacktest.Do(t, slacktest.Signed(t, s.base+"/slack/events", slacktest.Secret, time.Now(), body2)); code != http.StatusOK {
		t.Fatalf("POST /slack/events: %d %s", code, resp)
	}
	var slackAnswer string
	slacktest.WaitFor(t, "the Slack answer", slackDeadline, func() bool {
		for _, p := range slack.Posts() {
			if p.ThreadTS == root {
				slackAnswer = p.Text
				return true
			}
		}
		return false
	})
	for _, want := range []string{`local has k1`, `local saved "n1"`, `remote has k2`, `remote saved "n2"`} {
		if !strings.Contains(slackAnswer, want) {
			t.Errorf("Slack answer lacks %q:\n%s", want, slackAnswer)
		}
	}
	reqs := model.Requests()
	slackOffered := offeredTools(reqs[0])
	for _, c := range e2eMCPCalls {
		if !slices.Contains(slackOffered, c.Name) {
			t.Errorf("Slack request did not offer %s: %v", c.Name, slackOffered)
		}
	}
	if slices.ContainsFunc(slackOffered, func(n string) bool { return strings.HasPrefix(n, "broken__") }) {
		t.Errorf("tools of the broken server were offered: %v", slackOffered)
	}

	// WeChat: only the read tools are offered; the forced write calls are
	// answered "not available in this conversation" and counted denied.
	ilink.Add(wechattest.Message{ID: 515151, From: "bob@im.wechat", Text: "use the tools", ContextToken: "ctx-bob"})
	wechatEventually(t, "the WeChat answer", func() bool { return len(ilink.Sends()) == 1 }, s.stderr)
	wechatAnswer := ilink.Sends()[0].Text
	for _, want := range []string{"local has k1", "remote has k2", "local__save_note => error: tool local__save_note is not available in this conversation",
		"remote__save_note => error: tool remote__save_note is not available in this conversation"} {
		if !strings.Contains(wechatAnswer, want) {
			t.Errorf("WeChat answer lacks %q:\n%s", want, wechatAnswer)
		}
	}
	if strings.Contains(wechatAnswer, "saved") {
		t.Errorf("a write tool ran on WeChat:\n%s", wechatAnswer)
	}
	reqs = model.Requests()
	wechatOffered := offeredTools(reqs[2])
	for _, c := range e2eMCPCalls {
		writes := strings.HasSuffix(c.Name, mcptest.WriteTool)
		if slices.Contains(wechatOffered, c.Name) == writes {
			t.Errorf("WeChat request offered %v; want the read tools only", wechatOffered)
		}
	}
	for series, want := range map[string]string{
		`parley_tool_calls_total{channel="slack",outcome="ok",tool="local__save_note"}`:       "1",
		`parley_tool_calls_total{channel="slack",outcome="ok",tool="remote__lookup"}`:         "1",
		`parley_tool_calls_total{channel="wechat",outcome="denied",tool="local__save_note"}`:  "1",
		`parley_tool_calls_total{channel="wechat",outcome="denied",tool="remote__save_note"}`: "1",
		`parley_tool_calls_total{channel="wechat",outcome="ok",tool="remote__lookup"}`:        "1",
		// Never unavailable, so never made: tool series are not primed.
		`parley_tool_calls_total{channel="wechat",outcome="unavailable",tool="local__lookup"}`: "",
		`parley_tool_call_duration_seconds_count{tool="remote__save_note"}`:                    "1",
	} {
		if got := metricOf(t, s.base, series); got != want {
			t.Errorf("%s = %q, want %s", series, got, want)
		}
	}

	// The stdio server killed mid-session is restarted, its tools come
	// back, and the system prompt has not moved.
	pids := mcpProcesses(t, mark)
	if len(pids) != 1 {
		t.Fatalf("stdio server processes: %v, want one", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	localUp := func() string { return metricOf(t, s.base, `parley_mcp_server_up{server="local"}`) }
	slacktest.WaitFor(t, "the killed server to be seen down", slackDeadline, func() bool { return localUp() == "0" })
	slacktest.WaitFor(t, "the killed server to be restarted", slackDeadline, func() bool { return localUp() == "1" })
	body3, _ := json.Marshal(slacktest.Event("EvMCP2", slacktest.Mention("C1", "U1", "1700000500.000300", root, "again")))
	if code, resp := slacktest.Do(t, slacktest.Signed(t, s.base+"/slack/events", slacktest.Secret, time.Now(), body3)); code != http.StatusOK {
		t.Fatalf("POST /slack/events: %d %s", code, resp)
	}
	slacktest.WaitFor(t, "the second Slack answer", slackDeadline, func() bool {
		return len(slack.Posts()) >= 2 && strings.Contains(slack.Posts()[len(slack.Posts())-1].Text, `local saved "n1"`)
	})
	reqs = model.Requests()
	again := reqs[len(reqs)-2] // the second Slack turn's first request
	if !slices.Contains(offeredTools(again), "local__"+mcptest.WriteTool) {
		t.Errorf("the restarted server's tools are not offered: %v", offeredTools(again))
	}
	if again.Messages[0].Content != reqs[0].Messages[0].Content {
		t.Errorf("the system prompt changed after the server restarted:\n%s\n---\n%s", reqs[0].Messages[0].Content, again.Messages[0].Content)
	}

	// parley tools list, with the same configuration, shows every tool
	// with its source and class.
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"tools", "list"}, nil, &stdout, &stderr, mapEnv(serveEnv)); code != 0 {
		t.Fatalf("tools list exited %d: %s", code, stderr.String())
	}
	for _, row := range [][]string{
		{"local__lookup", "mcp:local", "read", "readOnlyHint", "up"},
		{"local__save_note", "mcp:local", "write", "default: no readOnlyHint", "up"},
		{"remote__lookup", "mcp:remote", "read", "up"},
		{"remote__save_note", "mcp:remote", "write", "up"},
		{"broken__*", "mcp:broken", "down"},
		{"web_fetch", "builtin", "read"},
		{"save_skill_reference", "builtin", "write"},
	} {
		if !hasRow(stdout.String(), row...) {
			t.Errorf("tools list has no row with %v:\n%s", row, stdout.String())
		}
	}
	if out := stdout.String() + stderr.String(); strings.Contains(out, token) {
		t.Errorf("tools list shows the server's token:\n%s", out)
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"tools", "list", "--json"}, nil, &stdout, &stderr, mapEnv(serveEnv)); code != 0 {
		t.Fatalf("tools list --json exited %d: %s", code, stderr.String())
	}
	var listed struct {
		Tools []toolRow `json:"tools"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &listed); err != nil {
		t.Fatalf("tools list --json: %v\n%s", err, stdout.String())
	}
	classes := map[string]string{}
	for _, r := range listed.Tools {
		classes[r.Name] = r.Source + " " + r.Class + " " + r.ServerState
	}
	if classes["remote__save_note"] != "mcp:remote write up" || classes["local__lookup"] != "mcp:local read up" || classes["web_fetch"] != "builtin read " {
		t.Errorf("tools list --json = %v", classes)
	}

	// policy explain lists each MCP tool with its class and the level that
	// decides it.
	stdout.Reset()
	if code := run(context.Background(), []string{"policy", "explain", "--channel", "wechat"}, nil, &stdout, &stderr, mapEnv(serveEnv)); code != 0 {
		t.Fatalf("policy explain exited %d: %s", code, stderr.String())
	}
	for _, row := range [][]string{
		{"local__save_note", "mcp:local", "write", "DENIED", "tools.write: false", "builtin wechat default"},
		{"remote__lookup", "mcp:remote", "read", "allowed", "builtin default"},
		{"broken__*", "mcp:broken", "write", "DENIED"},
		{"MCP server broken is down"},
	} {
		if !hasRow(stdout.String(), row...) {
			t.Errorf("policy explain has no row with %v:\n%s", row, stdout.String())
		}
	}

	// parley chat offers the same tools (the console allows writes).
	stdout.Reset()
	if code := run(context.Background(), []string{"chat", "-m", "use the tools"}, strings.NewReader(""), &stdout, &stderr, mapEnv(serveEnv)); code != 0 {
		t.Fatalf("chat exited %d: %s", code, stderr.String())
	}
	for _, want := range []string{`local saved "n1"`, `remote saved "n2"`, "local has k1", "remote has k2"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("chat answer lacks %q:\n%s", want, stdout.String())
		}
	}

	// Stopping serve stops the stdio server.
	s.stop(t)
	if !wechattest.WaitFor(10*time.Second, func() bool { return len(mcpProcesses(t, mark)) == 0 }) {
		t.Errorf("the stdio server outlived serve")
	}
	if strings.Contains(s.stderr.String(), token) {
		t.Errorf("the log shows the server's token")
	}
}

// hasRow reports whether a line of out holds every field, in order.
func hasRow(out string, fields ...string) bool {
	for l := range strings.Lines(out) {
		rest, ok := l, true
		for _, f := range fields {
			i := strings.Index(rest, f)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(f):]
		}
		if ok {
			return true
		}
	}
	return false
}

func offeredTools(req openai.ChatCompletionRequest) []string {
	var names []string
	for _, tool := range req.Tools {
		if tool.Function != nil {
			names = append(names, tool.Function.Name)
		}
	}
	return names
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricOf returns the value of one series on base's /metrics, or "".
func metricOf(t *testing.T, base, series string) string {
	t.Helper()
	_, body := get(t, base+"/metrics")
	for l := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), series+" "); ok {
			return v
		}
	}
	return ""
}
