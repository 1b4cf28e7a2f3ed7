package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/mcp"
	"github.com/parleyhq/parley/agent/mcp/mcptest"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/internal/redistest"
)

// The pre-registered client of the hosted MCP server's authorization
// server; the secret reaches Parley only through HOSTED_CLIENT_SECRET.
const (
	hostedClientID     = "parley-e2e"
	hostedClientSecret = "hosted-client-secret-e2e-0123456789"
)

// hostedTool is the hosted server's read tool as the model sees it.
const hostedTool = "hosted__" + mcptest.ReadTool

// hostedModel looks "ticket-7" up with hostedTool when it is offered,
// and says when it is not; given the tool's result it answers with it.
func hostedModel(req openai.ChatCompletionRequest) openaitest.Step {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == openai.ChatMessageRoleTool {
		_, content, _ := agent.UnwrapToolResult(last.Content)
		return openaitest.Text("found: " + content)
	}
	if slices.ContainsFunc(req.Tools, func(t openai.Tool) bool { return t.Function != nil && t.Function.Name == hostedTool }) {
		return openaitest.Tools(openaitest.Call(hostedTool, `{"key":"ticket-7"}`))
	}
	return openaitest.Text("I cannot reach the tracker")
}

// oauthServe is one `parley serve` replica with its admin console.
type oauthServe struct {
	*slackServe
	console string // the admin console's base URL
}

// startOAuthServe runs `parley serve` on the fakes and Redis r, with the
// admin console on its own listener, cfg as its config file and
// HOSTED_CLIENT_SECRET in its environment, and stops it at cleanup.
func startOAuthServe(t *testing.T, r *redistest.Redis, model *openaitest.Server, fake *slacktest.Server, cfg, consoleAddr string) *oauthServe {
	t.Helper()
	addr := freeAddr(t)
	env := oauthEnv(r, model, fake)
	env["PARLEY_LISTEN"], env["PARLEY_HOME"] = addr, t.TempDir()
	env["PARLEY_ADMIN_TOKEN"], env["PARLEY_ADMIN_LISTEN"] = adminToken, consoleAddr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	s := &oauthServe{slackServe: &slackServe{base: "http://" + addr, stderr: &syncBuffer{}}, console: "http://" + consoleAddr}
	go func() { done <- run(ctx, []string{"serve", "--config", cfg}, nil, io.Discard, s.stderr, mapEnv(env)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited %d:\n%s", code, s.stderr.String())
			}
		case <-time.After(slackDeadline):
			t.Errorf("serve did not stop")
		}
	})
	waitFor(t, s.base+"/readyz", s.stderr)
	return s
}

// oauthEnv is the environment every command of the test shares.
func oauthEnv(r *redistest.Redis, model *openaitest.Server, fake *slacktest.Server) map[string]string {
	return map[string]string{
		"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "REDIS_URL": r.URL,
		"SLACK_BOT_TOKEN": slacktest.BotToken, "SLACK_SIGNING_SECRET": slacktest.Secret, "SLACK_API_URL": fake.APIURL(),
		"HOSTED_CLIENT_SECRET": hostedClientSecret,
	}
}

// loginRun is a `parley mcp login` running in the background.
type loginRun struct {
	stdout, stderr *syncBuffer
	done           chan int
}

// authURL waits for the URL the login prints.
func (l *loginRun) authURL(t *testing.T) string {
	t.Helper()
	var u string
	slacktest.WaitFor(t, "the login to print the authorization URL", slackDeadline, func() bool {
		for _, line := range strings.Split(l.stdout.String(), "\n") {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "http") {
				u = line
				return true
			}
		}
		return false
	})
	return u
}

// Done when of issue 31's OAuth item: a hosted-style MCP server behind
// OAuth (a real SDK server behind bearer tokens, its authorization server
// strict about PKCE, redirect and resource) is usable from two `parley
// serve` replicas after one `parley mcp login`, the browser's answer
// landing on replica A's admin console. Before, the question is answered
// without the tool and /readyz and `parley tools list` say the server
// needs a sign-in; after, a mention to each replica gets the tool's
// answer. The server only ever saw its own tokens, and no token or secret
// reached any output.
func TestHostedMCPServerBehindOAuthAfterOneLogin(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	model := openaitest.New(t, openaitest.WithResponder(hostedModel))
	fake := slacktest.New(t)
	as := mcptest.NewAuthServer(t)
	hosted := mcptest.NewProtectedServer(t, as, "hosted")
	consoleA, consoleB := freeAddr(t), freeAddr(t)
	callback := "http://" + consoleA + mcp.CallbackPath
	as.Register(hostedClientID, hostedClientSecret, callback)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  prefix: %q
gateway:
  shutdown_timeout: 10s
  typing_delay: 0s
tools:
  mcp:
    # A backoff longer than the test: the replicas must use the sign-in
    # as soon as it is saved, not at their next try.
    retry: {base: 1h, max: 1h}
    servers:
      hosted:
        url: %q
        oauth:
          client_id: %s
          client_secret: ${HOSTED_CLIENT_SECRET}
          redirect_url: %q
`, r.Prefix, hosted.URL, hostedClientID, callback))
	a := startOAuthServe(t, r, model, fake, cfg, consoleA)
	b := startOAuthServe(t, r, model, fake, cfg, consoleB)

	// Before the sign-in: the tool is not offered, and every place an
	// operator looks says how to sign in.
	const before = "1700003100.000100"
	b.event(t, slacktest.Event("EvOAuth0", slacktest.Mention("C1", "U1", before, "", "what is ticket-7?")), 0)
	waitPost(t, fake, "C1", before, "I cannot reach the tracker")
	const needs = "MCP server hosted (needs sign-in: not signed in: sign in with `parley mcp login hosted`)"
	for _, s := range []*oauthServe{a, b} {
		if code, body := get(t, s.base+"/readyz"); code != http.StatusOK || !strings.Contains(body, "degraded: "+needs+" is down") {
			t.Fatalf("/readyz before the sign-in: %d %q", code, body)
		}
	}
	env := oauthEnv(r, model, fake)
	var list, listErr syncBuffer
	if code := run(context.Background(), []string{"tools", "list", "--config", cfg}, nil, &list, &listErr, mapEnv(env)); code != 0 {
		t.Fatalf("tools list exited %d: %s", code, listErr.String())
	}
	if !strings.Contains(list.String(), "sign in with `parley mcp login hosted`") {
		t.Fatalf("tools list does not say hosted needs a sign-in:\n%s", list.String())
	}

	if code, body := adminGet(t, a.console, "/admin/tools"); code != http.StatusOK || !strings.Contains(body, "not signed in: sign in with") {
		t.Fatalf("the console's tools page does not say hosted needs a sign-in: %d\n%s", code, body)
	}
	// A forged answer on the other console (no login waits for its state)
	// is refused, and the page repeats none of it.
	if code, body := get(t, b.console+mcp.CallbackPath+"?state=forged-state&code=forged-code"); code != http.StatusBadRequest || strings.Contains(body, "forged") {
		t.Fatalf("a forged callback: %d %q", code, body)
	}

	// The one sign-in, its answer reaching replica A's console.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	login := &loginRun{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan int, 1)}
	go func() {
		login.done <- run(ctx, []string{"mcp", "login", "--config", cfg, "hosted"}, nil, login.stdout, login.stderr, mapEnv(env))
	}()
	mcptest.Operator{}.SignIn(t, login.authURL(t))
	select {
	case code := <-login.done:
		if code != 0 || !strings.Contains(login.stdout.String(), "Signed in to hosted: 2 tools.") {
			t.Fatalf("login exited %d:\n%s\n%s", code, login.stdout.String(), login.stderr.String())
		}
	case <-ctx.Done():
		t.Fatalf("the login did not end:\n%s", login.stdout.String())
	}

	// Both replicas use the sign-in, neither restarted nor at its next
	// try.
	for i, s := range []*oauthServe{b, a} {
		slacktest.WaitFor(t, fmt.Sprintf("replica %d to connect to hosted", i), slackDeadline, func() bool {
			_, body := get(t, s.base+"/readyz")
			return !strings.Contains(body, "hosted")
		})
		root := fmt.Sprintf("1700003101.00010%d", i)
		s.event(t, slacktest.Event(fmt.Sprintf("EvOAuth%d", i+1), slacktest.Mention("C1", "U1", root, "", "what is ticket-7?")), 0)
		waitPost(t, fake, "C1", root, "found: hosted has ticket-7")
	}

	if ex, _, _ := as.Counts(); ex != 1 {
		t.Errorf("%d code exchanges, want the one login's", ex)
	}
	seen := hosted.TokensSeen()
	if len(seen) == 0 {
		t.Fatal("the hosted server saw no token")
	}
	for token := range seen {
		if g, ok := as.Issued(token); !ok || g.Resource != hosted.URL {
			t.Errorf("the hosted server was sent a token not issued for it (%+v, %v)", g, ok)
		}
	}
	outputs := map[string]string{
		"replica A": a.stderr.String(), "replica B": b.stderr.String(),
		"login": login.stdout.String() + login.stderr.String(), "tools list": list.String() + listErr.String(),
	}
	for _, p := range fake.Posts() {
		outputs["Slack"] += p.Text + p.Blocks
	}
	for where, out := range outputs {
		for _, secret := range as.Secrets() {
			if strings.Contains(out, secret) {
				t.Errorf("a token or the client secret reached the output of the %s", where)
			}
		}
	}
}
