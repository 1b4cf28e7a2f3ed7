package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	openai "github.com/sashabaranov/go-openai"

	"github.com/parleyhq/parley/agent/mcp/mcptest"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/internal/redistest"
)

// deployServer is an MCP server whose deploy tool reports a step of
// progress, then asks the person whether to go ahead, and answers with
// what came back.
func deployServer() *sdk.Server {
	s := mcptest.New("ops")
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"env": map[string]any{"type": "string", "title": "Environment", "enum": []string{"prod", "staging"}},
	}, "required": []string{"env"}}
	sdk.AddTool(s, &sdk.Tool{Name: "deploy", Description: "Deploys the build."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			if token := req.Params.GetProgressToken(); token != nil {
				_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: 1, Total: 2})
			}
			res, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Message: "Deploy build 42 where? <!channel>", RequestedSchema: schema})
			if err != nil {
				return mcptest.Text("deploy failed: " + err.Error()), nil, nil
			}
			data, _ := json.Marshal(res.Content)
			return mcptest.Text(fmt.Sprintf("deploy %s %s", res.Action, data)), nil, nil
		})
	return s
}

// deployModel calls ops__deploy on "deploy" and reports its result.
func deployModel(req openai.ChatCompletionRequest) openaitest.Step {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "tool" {
		i := strings.Index(last.Content, "deploy ")
		if i < 0 {
			return openaitest.Text("done: " + last.Content)
		}
		rest := last.Content[i:]
		return openaitest.Text("done: " + rest[:strings.IndexAny(rest, "\n<")])
	}
	if strings.HasSuffix(last.Content, "deploy") {
		return openaitest.Tools(openaitest.Call("ops__deploy", `{}`))
	}
	return openaitest.Text("echo")
}

// TestAToolServersQuestionIsAskedInTheSlackThread: through parley serve
// on two replicas, an MCP server's question in the middle of a call is
// posted in the thread with a button per choice; another person's click
// is refused; the asker's click, reaching the other replica, answers it,
// and the call (whose clock stopped while the person chose) ends with the
// value. The call's progress showed in the thread's status.
func TestAToolServersQuestionIsAskedInTheSlackThread(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	model := openaitest.New(t, openaitest.WithResponder(deployModel))
	fake := slacktest.New(t)
	mcpSrv := httptest.NewServer(mcptest.Handler(deployServer()))
	t.Cleanup(mcpSrv.Close)
	// A call timeout shorter than the person takes: their time must not
	// count.
	extra := fmt.Sprintf("tools:\n  mcp:\n    servers:\n      ops:\n        url: %q\n        timeout: 2s\n", mcpSrv.URL+"/mcp")
	a := startSlackServeWith(t, r, model, fake, extra)
	b := startSlackServeWith(t, r, model, fake, extra)
	waitFor(t, a.base+"/readyz", a.stderr)
	waitFor(t, b.base+"/readyz", b.stderr)

	const root = "1700000900.000100"
	a.event(t, slacktest.Event("EvAsk1", slacktest.Mention("C1", "U1", root, "", "deploy")), 0)
	var question slacktest.Post
	slacktest.WaitFor(t, "the question in the thread", slackDeadline, func() bool {
		for _, p := range fake.Posts() {
			if p.ThreadTS == root && p.Blocks != "" && strings.Contains(p.Text, "ops asks") {
				question = p
				return true
			}
		}
		return false
	})
	if strings.Contains(question.Blocks, "<!channel>") {
		t.Fatalf("the server's words were posted as they are: %s", question.Blocks)
	}
	var prod string
	var blocks []struct {
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		}
	}
	if err := json.Unmarshal([]byte(question.Blocks), &blocks); err != nil {
		t.Fatal(err)
	}
	for _, bl := range blocks {
		for _, e := range bl.Elements {
			if strings.HasSuffix(e.Value, " prod") {
				prod = e.ActionID + "=" + e.Value
			}
		}
	}
	action, value, ok := strings.Cut(prod, "=")
	if !ok {
		t.Fatalf("no button for prod in %s", question.Blocks)
	}
	click := func(s *slackServe, user string) {
		t.Helper()
		body := slacktest.InteractionForm(slacktest.Click(question, user, "name-"+user, action, value, ""))
		if code, resp := slacktest.Do(t, slacktest.Signed(t, s.base+"/slack/interactions", slacktest.Secret, time.Now(), body)); code != http.StatusOK {
			t.Fatalf("click: %d %s", code, resp)
		}
	}
	click(b, "U2")
	waitPost(t, fake, "C1", root, "That question is not open to you: it was asked of someone else, or it is closed.")
	time.Sleep(3 * time.Second) // longer than the call's timeout: it must not count
	click(b, "U1")
	waitPost(t, fake, "C1", root, `done: deploy accept {"env":"prod"}`)

	statuses := 0
	for _, c := range fake.Log() {
		if c.Method == "assistant.threads.setStatus" && strings.Contains(c.Text, "ops__deploy 1/2") {
			statuses++
		}
	}
	if statuses == 0 {
		t.Errorf("the call's progress never showed in the thread's status: %v", fake.Log())
	}
}
