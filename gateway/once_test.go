package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	openai "github.com/sashabaranov/go-openai"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/mcp"
	"github.com/parleyhq/parley/agent/mcp/mcptest"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/skills"
)

// ledgerServer is a real MCP server whose write tool appends to a list,
// so a test can count the times it really ran.
type ledgerServer struct {
	mu    sync.Mutex
	lines []string
	keys  []any // the idempotency key of each call
}

type appendArgs struct {
	Line string `json:"line" jsonschema:"the line to append"`
}

func newLedgerServer(t *testing.T) (*ledgerServer, string) {
	t.Helper()
	ls := &ledgerServer{}
	s := sdk.NewServer(&sdk.Implementation{Name: "parley-test-ledger", Version: "v1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "append", Description: "Append a line to the ledger."},
		func(_ context.Context, req *sdk.CallToolRequest, a appendArgs) (*sdk.CallToolResult, any, error) {
			ls.mu.Lock()
			defer ls.mu.Unlock()
			ls.lines = append(ls.lines, a.Line)
			ls.keys = append(ls.keys, req.Params.GetMeta()[mcp.IdempotencyKeyMeta])
			return mcptest.Text(fmt.Sprintf("appended line %d", len(ls.lines))), nil, nil
		})
	srv := httptest.NewServer(mcptest.Handler(s))
	t.Cleanup(srv.Close)
	return ls, srv.URL
}

func (ls *ledgerServer) appended() []string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return append([]string(nil), ls.lines...)
}

// onceReplica is one replica of a bot with the skill tools and an MCP
// server's tools, on a shared Redis, skills home and MCP server.
type onceReplica struct {
	gw *gateway.Gateway
	ch *recorder
}

func newOnceReplica(t *testing.T, r *redistest.Redis, home, mcpURL string, model *openaitest.Server, sweep time.Duration) *onceReplica {
	t.Helper()
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Second})
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tools := agent.NewRegistry()
	for _, tool := range agent.NewSkillTools(agent.SkillToolsConfig{Home: home, Budget: 16 * 1024, Writer: skills.NewWriter(home)}, m, log).Tools() {
		tools.Register(tool)
	}
	mgr, err := mcp.New(mcp.Config{Servers: map[string]mcp.ServerConfig{"ledger": {URL: mcpURL}}}, mcp.Options{Registry: tools})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })
	if _, ok := tools.Get("ledger__append"); !ok {
		t.Fatal("the MCP write tool is not registered")
	}
	reg, err := skills.NewRegistry(skills.Layers{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	state, _ := skills.OpenFileState(home)
	a := agent.New(agent.Config{Model: "test", Timeout: 10 * time.Second}, agent.NewClient(model.URL(), "sk", nil), tools, m, log)
	gw := gateway.New(gateway.Config{Tools: tools, Skills: &gateway.Skills{Registry: reg, State: state}, SweepEvery: sweep}, store, a, m, log)
	ch := newRecorder("slack")
	gw.Register(ch)
	gw.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		gw.Shutdown(ctx)
	})
	return &onceReplica{gw: gw, ch: ch}
}

// TestWriteToolsRunAtMostOncePerCall (issue 12, item 8): replica A loses
// the conversation lock after its write tools ran, replica B answers the
// message again and the model makes the same writes: save_skill_reference
// appends once and the MCP write tool runs once; B's model is given the
// results recorded by A's calls.
func TestWriteToolsRunAtMostOncePerCall(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	home := t.TempDir()
	writeSkillFile(t, filepath.Join(skills.UserSkillsDir(home), "deploy"), "---\nname: deploy\ndescription: How to deploy the service safely.\n---\n# Deploy\nRun the canary first.\n")
	ledger, mcpURL := newLedgerServer(t)
	writes := openaitest.Tools(
		openaitest.Call("save_skill_reference", `{"name":"deploy","file":"references/notes.md","content":"The canary needs 10 minutes."}`),
		openaitest.Call("ledger__append", `{"line":"deployed v2"}`),
	)

	// A's model asks for the writes, then holds its answer while the
	// test takes the lock away and B answers the message.
	waiting, release := make(chan struct{}), make(chan struct{})
	modelA := openaitest.New(t, openaitest.WithResponder(func(req openai.ChatCompletionRequest) openaitest.Step {
		close(waiting)
		<-release
		return openaitest.Text("A answered")
	}))
	modelA.Script(writes)
	a := newOnceReplica(t, r, home, mcpURL, modelA, time.Hour)
	m := msg("t", "Ev1", "note how long the canary takes and log the deploy")
	if err := a.gw.Submit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	select {
	case <-waiting:
	case <-time.After(30 * time.Second):
		t.Fatal("replica A never ran its write tools")
	}
	if got := ledger.appended(); len(got) != 1 {
		t.Fatalf("after A's calls the ledger holds %q; want one line", got)
	}
	// The lock is lost: it expired while A's holder was stalled, say.
	if err := r.Client.Del(context.Background(), r.Prefix+"conv:{"+m.ConversationKey()+"}:lock").Err(); err != nil {
		t.Fatal(err)
	}
	modelB := openaitest.New(t)
	modelB.Script(writes, openaitest.Text("B answered"))
	b := newOnceReplica(t, r, home, mcpURL, modelB, 20*time.Millisecond)
	if got := b.ch.wait(t, 1)[0].reply.Text; got != "B answered" {
		t.Fatalf("B replied %q", got)
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.gw.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	note, err := os.ReadFile(filepath.Join(skills.SupplementDir(home, "deploy"), "notes.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(note), "The canary needs 10 minutes."); n != 1 {
		t.Errorf("save_skill_reference appended %d times:\n%s", n, note)
	}
	if got := ledger.appended(); len(got) != 1 {
		t.Errorf("the MCP write tool ran %d times: %q", len(got), got)
	}
	ledger.mu.Lock()
	keys := fmt.Sprint(ledger.keys)
	ledger.mu.Unlock()
	if !regexp.MustCompile(`^\[[0-9a-f]{32}\]$`).MatchString(keys) {
		t.Errorf("the MCP server was given idempotency keys %s; want one", keys)
	}
	// B's model got A's results, marked as not run again.
	reqs := modelB.Requests()
	if len(reqs) != 2 {
		t.Fatalf("B's model saw %d requests", len(reqs))
	}
	var results []string
	for _, sent := range reqs[1].Messages {
		if sent.Role == "tool" {
			results = append(results, sent.Content)
		}
	}
	if len(results) != 2 || !strings.Contains(results[0], "not run again") || !strings.Contains(results[0], "Saved:") ||
		!strings.Contains(results[1], "not run again") || !strings.Contains(results[1], "appended line 1") {
		t.Errorf("B's model was given %q; want A's recorded results", results)
	}
	if n := len(a.ch.got); n != 0 {
		t.Errorf("A, whose lock was lost, sent %d replies", n)
	}
}
