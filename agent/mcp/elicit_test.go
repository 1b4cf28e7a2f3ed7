package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/mcp/mcptest"
	"github.com/parleyhq/parley/agent/toolsource"
	"github.com/parleyhq/parley/config"
)

// askSchema is the form the "ask" tool requests.
var askSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"repo":  map[string]any{"type": "string", "title": "Repository"},
		"count": map[string]any{"type": "integer", "minimum": 1},
		"sure":  map[string]any{"type": "boolean", "default": true},
	},
	"required": []string{"repo"},
}

// newAskingServer is an MCP server whose "ask" tool asks the user for a
// form and answers with what came back, whose "steps" tool reports three
// steps of progress and logs a line, and whose "link" tool asks the user
// to open a URL. steps waits for seen (when not nil) to close before it
// ends: a notification may be handled after the answer it preceded, and
// progress after the answer is no longer shown.
func newAskingServer(seen <-chan struct{}) *sdk.Server {
	s := mcptest.New("asking")
	sdk.AddTool(s, &sdk.Tool{Name: "ask", Description: "Asks which repository."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Message: "Which repository?", RequestedSchema: askSchema})
			if err != nil {
				return mcptest.Text("elicitation failed: " + err.Error()), nil, nil
			}
			data, _ := json.Marshal(res.Content)
			return mcptest.Text(fmt.Sprintf("%s %s", res.Action, data)), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "link", Description: "Asks to sign in."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Mode: "url", Message: "Sign in", URL: "https://example.com/signin", ElicitationID: "e1"})
			if err != nil {
				return mcptest.Text("elicitation failed: " + err.Error()), nil, nil
			}
			return mcptest.Text(res.Action), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "steps", Description: "Three steps."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			token := req.Params.GetProgressToken()
			if token == nil {
				return mcptest.Text("no progress token"), nil, nil
			}
			for i := 1; i <= 3; i++ {
				if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: 3}); err != nil {
					return nil, nil, err
				}
			}
			if seen != nil {
				select {
				case <-seen:
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
			if err := req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "warning", Logger: "steps", Data: "step three done"}); err != nil {
				return nil, nil, err
			}
			return mcptest.Text("done"), nil, nil
		})
	return s
}

// recordingElicitor answers with answer, recording what it was asked and
// on whose behalf.
type recordingElicitor struct {
	answer func(*ElicitRequest) (*ElicitResult, error)

	mu    sync.Mutex
	asked []*ElicitRequest
	users []string
}

func (e *recordingElicitor) Elicit(ctx context.Context, req *ElicitRequest) (*ElicitResult, error) {
	tc, ok := TurnFrom(ctx)
	e.mu.Lock()
	e.asked = append(e.asked, req)
	if ok {
		e.users = append(e.users, tc.Channel+"/"+tc.Conversation+"/"+tc.User)
	}
	e.mu.Unlock()
	return e.answer(req)
}

func askingFixture(t *testing.T, opts Options, seen <-chan struct{}) *fixture {
	t.Helper()
	srv := httptestServe(t, newAskingServer(seen))
	f := newFixture(t, Config{Servers: map[string]ServerConfig{"gh": {URL: srv}}}, opts)
	f.start(t)
	return f
}

// httptestServe serves s over streamable HTTP until the test ends.
func httptestServe(t *testing.T, s *sdk.Server) string {
	t.Helper()
	srv := httptest.NewServer(mcptest.Handler(s))
	t.Cleanup(srv.Close)
	return srv.URL
}

// The server's question reaches the Elicitor with who asked; the answer,
// checked against the form, goes back to the server; without an Elicitor
// the question is declined; an answer that does not fit the form never
// reaches the server.
func TestElicitationRelayed(t *testing.T) {
	cases := []struct {
		name     string
		elicitor bool
		answer   *ElicitResult
		want     string
		wantErr  string
	}{
		{name: "no elicitor declines", want: "decline null"},
		{name: "accepted", elicitor: true, answer: &ElicitResult{Action: ElicitAccept, Content: map[string]any{"repo": "parley", "count": 2}}, want: `accept {"count":2,"repo":"parley","sure":true}`},
		{name: "declined", elicitor: true, answer: &ElicitResult{Action: ElicitDecline}, want: "decline null"},
		{name: "cancelled", elicitor: true, answer: &ElicitResult{Action: ElicitCancel}, want: "cancel null"},
		{name: "wrong type refused", elicitor: true, answer: &ElicitResult{Action: ElicitAccept, Content: map[string]any{"repo": "parley", "count": "two"}}, want: "elicitation failed"},
		{name: "missing required refused", elicitor: true, answer: &ElicitResult{Action: ElicitAccept, Content: map[string]any{"count": 2}}, want: "elicitation failed"},
		{name: "unknown action refused", elicitor: true, answer: &ElicitResult{Action: "yes"}, want: "elicitation failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := &recordingElicitor{answer: func(*ElicitRequest) (*ElicitResult, error) { return tc.answer, nil }}
			var opts Options
			if tc.elicitor {
				opts.Elicitor = e
			}
			f := askingFixture(t, opts, nil)
			got, err := f.call(t, context.Background(), "gh__ask", `{}`)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("tool answered %q, want %q", got, tc.want)
			}
			if !tc.elicitor {
				return
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			if len(e.asked) != 1 || len(e.users) != 1 {
				t.Fatalf("asked %d times, users %v; want once, with who asked", len(e.asked), e.users)
			}
			r := e.asked[0]
			if r.Server != "gh" || r.Tool != "gh__ask" || r.Mode != ElicitForm || r.Message != "Which repository?" || !strings.Contains(string(r.Schema), `"repo"`) {
				t.Fatalf("request = %+v", r)
			}
			if e.users[0] != "slack/c1/U1" {
				t.Fatalf("asked on behalf of %q, want slack/c1/U1", e.users[0])
			}
		})
	}
}

// A URL-mode question carries its link and id; accepting it sends no
// content.
func TestElicitationURLMode(t *testing.T) {
	e := &recordingElicitor{answer: func(*ElicitRequest) (*ElicitResult, error) {
		return &ElicitResult{Action: ElicitAccept, Content: map[string]any{"leak": "x"}}, nil
	}}
	f := askingFixture(t, Options{Elicitor: e}, nil)
	got, err := f.call(t, context.Background(), "gh__link", `{}`)
	if err != nil || got != "accept" {
		t.Fatalf("call = %q, %v; want accept", got, err)
	}
	r := e.asked[0]
	if r.Mode != ElicitURL || r.URL != "https://example.com/signin" || r.ID != "e1" || r.Schema != nil {
		t.Fatalf("request = %+v", r)
	}
}

// An Elicitor's failure reaches the server as the request's failure, with
// no secret of the server's configuration in it.
func TestElicitationElicitorError(t *testing.T) {
	e := &recordingElicitor{answer: func(*ElicitRequest) (*ElicitResult, error) { return nil, errors.New("relay down") }}
	f := askingFixture(t, Options{Elicitor: e}, nil)
	got, err := f.call(t, context.Background(), "gh__ask", `{}`)
	if err != nil || !strings.Contains(got, "elicitation failed") {
		t.Fatalf("call = %q, %v; want the server told of the failure", got, err)
	}
}

// Check is what a relay uses to ask again: it names what is wrong.
func TestElicitRequestCheck(t *testing.T) {
	r, err := newElicitRequest("gh", "gh__ask", &sdk.ElicitParams{Message: "?", RequestedSchema: askSchema})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		content map[string]any
		ok      bool
	}{
		{map[string]any{"repo": "a"}, true},
		{map[string]any{"repo": "a", "count": 3, "sure": false}, true},
		{map[string]any{}, false},
		{map[string]any{"repo": 1}, false},
		{map[string]any{"repo": "a", "count": 0}, false},
		{map[string]any{"repo": "a", "sure": "yes"}, false},
	} {
		if err := r.Check(tc.content); (err == nil) != tc.ok {
			t.Errorf("Check(%v) = %v, want ok=%v", tc.content, err, tc.ok)
		}
	}
	// A form may not make Parley fetch anything.
	if _, err := newElicitRequest("gh", "t", &sdk.ElicitParams{RequestedSchema: map[string]any{"$ref": "http://127.0.0.1:1/x.json"}}); err == nil {
		t.Error("a remote $ref was accepted")
	}
}

// A question is put to the person whose call it arose in, and to no one
// when that cannot be told: calls of two people in flight at once.
func TestElicitationAsker(t *testing.T) {
	alice := &agent.TurnContext{Conversation: "c1", User: "alice"}
	alice2 := &agent.TurnContext{Conversation: "c1", User: "alice"}
	bob := &agent.TurnContext{Conversation: "c1", User: "bob"}
	elsewhere := &agent.TurnContext{Conversation: "c2", User: "alice"}
	cases := []struct {
		name  string
		turns []*agent.TurnContext
		token int // index of the call whose token the request carries; -1 none
		want  *agent.TurnContext
	}{
		{"nobody", nil, -1, nil},
		{"only call", []*agent.TurnContext{alice}, -1, alice},
		{"same person twice", []*agent.TurnContext{alice, alice2}, -1, alice},
		{"two people", []*agent.TurnContext{alice, bob}, -1, nil},
		{"one person, two conversations", []*agent.TurnContext{alice, elsewhere}, -1, nil},
		{"no turn", []*agent.TurnContext{alice, nil}, -1, nil},
		{"token picks", []*agent.TurnContext{alice, bob}, 1, bob},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var f inflight
			var tokens []string
			for _, turn := range tc.turns {
				tok, done := f.add(&call{turn: turn, ctx: context.Background()})
				defer done()
				tokens = append(tokens, tok)
			}
			var token any
			if tc.token >= 0 {
				token = tokens[tc.token]
			}
			got := f.asker(token)
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("asker = %+v, want nobody", got.turn)
			case tc.want != nil && (got == nil || got.turn.User != tc.want.User):
				t.Fatalf("asker = %+v, want %s", got, tc.want.User)
			}
		})
	}
}

// A call sends a progress token; the server's progress reaches OnProgress
// with the call's tool and turn; its log lines reach Parley's log at debug.
func TestProgressAndServerLogs(t *testing.T) {
	var mu sync.Mutex
	var seen []Progress
	all := make(chan struct{})
	f := askingFixture(t, Options{OnProgress: func(_ context.Context, p Progress) {
		mu.Lock()
		defer mu.Unlock()
		if seen = append(seen, p); len(seen) == 3 {
			close(all)
		}
	}}, all)
	got, err := f.call(t, context.Background(), "gh__steps", `{}`)
	if err != nil || got != "done" {
		t.Fatalf("call = %q, %v", got, err)
	}
	waitFor(t, "three progress notifications", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 3
	})
	mu.Lock()
	last := seen[2]
	mu.Unlock()
	if last.Tool != "gh__steps" || last.Turn == nil || last.Turn.User != "U1" || last.String() != "running gh__steps… 3/3" {
		t.Fatalf("progress = %+v (%q)", last, last.String())
	}
	waitFor(t, "the server's log line", func() bool {
		return strings.Contains(f.log.String(), `level=DEBUG msg="mcp: server log" component=mcp server=gh level=warning logger=steps data="step three done"`)
	})
}

func TestProgressString(t *testing.T) {
	for _, tc := range []struct {
		p    Progress
		want string
	}{
		{Progress{Tool: "t", Progress: 2, Total: 3}, "running t… 2/3"},
		{Progress{Tool: "t", Progress: 40, Total: 100}, "running t… 40%"},
		{Progress{Tool: "t", Progress: 7}, "running t… 7"},
		{Progress{Tool: "t"}, "running t…"},
		{Progress{Tool: "t", Progress: 1, Total: 2, Message: "cloning"}, "running t… 1/2 cloning"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.p, got, tc.want)
		}
	}
}

// The gateway's relay and progress sink reach the servers through the
// tool source's hooks, as `parley serve` opens it.
func TestSourceHooks(t *testing.T) {
	e := &recordingElicitor{answer: func(*ElicitRequest) (*ElicitResult, error) {
		return &ElicitResult{Action: ElicitAccept, Content: map[string]any{"repo": "parley"}}, nil
	}}
	first := make(chan struct{})
	seen := sync.OnceFunc(func() { close(first) })
	onProgress := func(context.Context, Progress) { seen() }
	c := config.Default()
	url := httptestServe(t, newAskingServer(first))
	c.Tools = map[string]config.SectionConfig{Section: &Config{Servers: map[string]ServerConfig{"gh": {URL: url}}, Retry: DefaultRetry}}
	reg := agent.NewRegistry()
	opened, err := openSource(context.Background(), c, toolsource.Deps{Registry: reg, Wait: time.Minute, Hooks: []any{e, onProgress, "ignored"}})
	if err != nil {
		t.Fatal(err)
	}
	defer opened.Close()
	tool, ok := reg.Get("gh__ask")
	if !ok {
		t.Fatal("gh__ask not registered")
	}
	res, err := tool.Call(context.Background(), &agent.TurnContext{Conversation: "c1", User: "U1"}, json.RawMessage(`{}`))
	if err != nil || !strings.HasPrefix(res.Content, "accept") {
		t.Fatalf("ask = %q, %v", res.Content, err)
	}
	// steps ends only once its progress has reached the hook.
	steps, _ := reg.Get("gh__steps")
	if res, err := steps.Call(context.Background(), &agent.TurnContext{Conversation: "c1", User: "U1"}, json.RawMessage(`{}`)); err != nil || res.Content != "done" {
		t.Fatalf("steps = %q, %v", res.Content, err)
	}
}
