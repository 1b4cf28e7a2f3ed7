package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
)

// askTool stands for a tool whose server asks the person a question in
// the middle of the call (an MCP elicitation): it asks through its
// replica's gateway and returns what became of the question.
type askTool struct {
	gw     **gateway.Gateway
	schema string
}

func (askTool) Name() string                { return "deploy" }
func (askTool) Description() string         { return "deploys" }
func (askTool) Parameters() json.RawMessage { return nil }
func (askTool) Writes() bool                { return false }
func (t askTool) Call(ctx context.Context, _ *agent.TurnContext, _ json.RawMessage) (agent.Result, error) {
	a, err := (*t.gw).Ask(ctx, gateway.Question{From: "deployer <!channel>", Message: "Deploy build 42 to @prod?", Schema: json.RawMessage(t.schema)})
	if err != nil {
		return agent.Result{}, err
	}
	content, _ := json.Marshal(a.Content)
	return agent.Result{Content: fmt.Sprintf("answer %s %s", a.Action, content)}, nil
}

// askModel calls deploy on "deploy" and reports the tool's result.
func askModel(req openai.ChatCompletionRequest) openaitest.Step {
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last.Role == "tool":
		i := strings.Index(last.Content, "answer ")
		rest := last.Content[i:]
		return openaitest.Text("done: " + rest[:strings.IndexAny(rest, "\n<")])
	case last.Content == "deploy":
		return openaitest.Tools(openaitest.Call("deploy", `{}`))
	}
	return openaitest.Text("echo: " + last.Content)
}

// newAskReplica is a replica on r whose deploy tool asks with schema, its
// replies sent to ch.
func newAskReplica(t *testing.T, r *redistest.Redis, model *openaitest.Server, ch channels.Channel, schema string, timeout time.Duration) *gateway.Gateway {
	t.Helper()
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Second})
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var gw *gateway.Gateway
	tools := agent.NewRegistry()
	if err := tools.Register(askTool{gw: &gw, schema: schema}); err != nil {
		t.Fatal(err)
	}
	pol := policy.New(policy.Config{Platforms: map[string]policy.PlatformPolicy{"slack": {Level: config.Level{ApprovalTimeout: &timeout}}}})
	a := agent.New(agent.Config{Model: "test", Timeout: 30 * time.Second}, agent.NewClient(model.URL(), "sk", nil), tools, m, log)
	gw = gateway.New(gateway.Config{Tools: tools, Policy: pol}, store, a, m, log)
	gw.Register(ch)
	gw.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		gw.Shutdown(ctx)
	})
	return gw
}

func isQuestion(r channels.Reply) bool { return r.Question != nil }

// TestAToolsQuestionIsAnsweredOnlyByThePersonAsked: the question is
// posted in the conversation with buttons; someone else's click is
// refused and their message waits for the turn; the person's answer
// reaches the waiting turn from another replica, a wrong one is asked
// again, and the tool gets the value the schema asks for, once.
func TestAToolsQuestionIsAnsweredOnlyByThePersonAsked(t *testing.T) {
	r := redistest.New(t)
	model := openaitest.New(t, openaitest.WithResponder(askModel))
	rec := newRecorder("slack")
	schema := `{"type":"object","properties":{"ok":{"type":"boolean","title":"Go ahead"}},"required":["ok"]}`
	a := newAskReplica(t, r, model, rec, schema, time.Minute)
	b := newAskReplica(t, r, model, rec, schema, time.Minute)

	submit(t, a, from("U1", "E1", "deploy"))
	i := rec.waitFor(t, 0, "with the question", isQuestion)
	q := rec.at(i)
	for _, bad := range []string{"<!channel>", "@prod"} {
		if strings.Contains(q.Text, bad) || strings.Contains(q.Question.Message+q.Question.From, bad) {
			t.Fatalf("the server's words are shown as they are (%q): %+v", bad, q)
		}
	}
	if len(q.Question.Choices) != 2 || !strings.Contains(q.Text, "Only U1 can answer") {
		t.Fatalf("question = %+v", q)
	}

	submit(t, b, from("U2", "", channels.AnswerText(q.Question.ID, "true")))
	rec.waitFor(t, i, "refusing someone else's click", textHas("not open to you"))
	submit(t, b, from("U2", "E2", "hello"))
	submit(t, b, from("U1", "E3", "perhaps"))
	rec.waitFor(t, i, "asking again", textHas("must be yes or no"))
	submit(t, b, from("U1", "", channels.AnswerText("OTHERQUESTION", "true")))
	rec.waitFor(t, i, "refusing a stale button", textHas("That question is closed"))
	submit(t, b, from("U1", "E4", "yes"))
	rec.waitFor(t, i, "the tool's answer", textIs(`done: answer accept {"ok":true}`))
	rec.waitFor(t, i, "the other person's message, after the turn", textIs("echo: hello"))
	for _, text := range rec.texts() {
		if text == "echo: perhaps" || text == "echo: yes" {
			t.Fatalf("an answer was queued as a message too: %q", rec.texts())
		}
	}
	// The question is over: the person's next message is a message again.
	submit(t, a, from("U1", "E5", "thanks"))
	rec.waitFor(t, i, "a message after the question", textIs("echo: thanks"))
}

// TestAToolsQuestionDeclinedOrUnansweredEndsTheWait: /decline answers
// decline, a question nobody answers ends with its timeout as cancel, and
// a schema Parley cannot ask is declined without asking.
func TestAToolsQuestionDeclinedOrUnansweredEndsTheWait(t *testing.T) {
	r := redistest.New(t)
	model := openaitest.New(t, openaitest.WithResponder(askModel))
	cases := []struct {
		name, schema, answer, want string
		timeout                    time.Duration
	}{
		{"declined", `{"type":"object","properties":{"n":{"type":"integer"}}}`, "/decline", "done: answer decline null", time.Minute},
		{"cancel clicked", `{"type":"object","properties":{"ok":{"type":"boolean"}}}`, "cancel", "done: answer cancel null", time.Minute},
		{"unanswered", `{"type":"object","properties":{"n":{"type":"integer"}}}`, "", "done: answer cancel null", 2 * time.Second},
		{"cannot ask", `{"type":"object","properties":{"n":{"type":"object"}}}`, "", "done: answer decline null", time.Minute},
	}
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := newRecorder("slack")
			gw := newAskReplica(t, r, model, rec, c.schema, c.timeout)
			m := from("U1", fmt.Sprint("D", k), "deploy")
			m.Thread = c.name
			submit(t, gw, m)
			if c.answer != "" {
				i := rec.waitFor(t, 0, "with the question", isQuestion)
				ans := m
				ans.ID, ans.Text = fmt.Sprint("A", k), c.answer
				if c.answer == "cancel" {
					ans.ID, ans.Text = "", channels.AnswerText(rec.at(i).Question.ID, "cancel")
				}
				submit(t, gw, ans)
			}
			rec.waitFor(t, 0, "the tool's answer", textIs(c.want))
			if c.name == "cannot ask" {
				for _, s := range rec.snapshot() {
					if s.reply.Question != nil {
						t.Fatal("a schema Parley cannot ask was asked")
					}
				}
			}
		})
	}
}
