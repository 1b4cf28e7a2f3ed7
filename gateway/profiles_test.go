package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
)

const (
	opsPrompt = "You are the on-call assistant of the platform team. Answer in one or two lines."
	hrAppend  = "Be polite and never discuss anyone's salary."
)

// profilePolicy gives workspace T1 the hr profile and its on-call
// channel, C_ONCALL, the ops profile.
func profilePolicy() *policy.Resolver {
	tree := policy.Config{Platforms: map[string]policy.PlatformPolicy{"slack": {
		Workspaces: map[string]policy.WorkspacePolicy{"T1": {
			Level: config.Level{Profile: "hr"},
			Chats: map[string]config.Level{"C_ONCALL": {Profile: "ops"}},
		}},
	}}}
	return policy.New(tree).WithProfiles(&policy.Profiles{ByName: map[string]policy.Profile{
		"ops": {SystemPrompt: opsPrompt},
		"hr":  {SystemPromptAppend: hrAppend},
	}})
}

// profileReplica is one gateway of a bot whose replicas share a Redis
// and a model; each has its own agent, so its own system-message cache.
type profileReplica struct {
	gw    *gateway.Gateway
	agent *agent.Agent
}

func newProfileReplica(t *testing.T, r *redistest.Redis, model *openaitest.Server, ch *recorder) profileReplica {
	t.Helper()
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Second, MaxMessages: 1000})
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := agent.New(agent.Config{Model: "test", Timeout: 5 * time.Second, MaxRetries: 1, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond},
		agent.NewClient(model.URL(), "sk-test", nil), agent.NewRegistry(), m, log)
	gw := gateway.New(gateway.Config{Workers: 4, QueueLimit: 100, Policy: profilePolicy()}, store, a, m, log)
	gw.Register(ch)
	gw.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := gw.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return profileReplica{gw: gw, agent: a}
}

// systemMessages returns the system message of each request the model
// got, as the bytes on the wire.
func systemMessages(t *testing.T, model *openaitest.Server) [][]byte {
	t.Helper()
	var out [][]byte
	for _, body := range model.RawRequests() {
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
			t.Fatalf("request %s: %v", body, err)
		}
		out = append(out, req.Messages[0])
	}
	return out
}

// systemContent decodes a system message's content.
func systemContent(t *testing.T, raw []byte) string {
	t.Helper()
	var m struct{ Role, Content string }
	if err := json.Unmarshal(raw, &m); err != nil || m.Role != "system" {
		t.Fatalf("system message %s: %v", raw, err)
	}
	return m.Content
}

// The model sees the profile of the message's chat: the on-call channel's
// ops prompt beats the workspace's hr profile, which every other channel
// of the workspace keeps, and another workspace has the default prompt.
func TestTheChatsProfileReachesTheModel(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	model := openaitest.New(t)
	ch := newRecorder("slack")
	rep := newProfileReplica(t, r, model, ch)
	scopes := []struct{ workspace, chat, want string }{
		{"T1", "C_ONCALL", rep.agent.SystemPromptFor(agent.Persona{Name: "ops", Prompt: opsPrompt}, "")},
		{"T1", "C_OTHER", rep.agent.SystemPromptFor(agent.Persona{Name: "hr", Append: hrAppend}, "")},
		{"T2", "C1", rep.agent.SystemPrompt("")},
	}
	for i, s := range scopes {
		m := msg("", fmt.Sprintf("E%d", i), "hello")
		m.Workspace, m.Chat = s.workspace, s.chat
		if err := rep.gw.Submit(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		ch.wait(t, i+1) // one at a time, so request i is scope i's
	}
	got := systemMessages(t, model)
	if len(got) != len(scopes) {
		t.Fatalf("%d model requests, want %d", len(got), len(scopes))
	}
	for i, s := range scopes {
		if c := systemContent(t, got[i]); c != s.want {
			t.Errorf("%s/%s: system prompt\n%q\nwant\n%q", s.workspace, s.chat, c, s.want)
		}
	}
	if c := systemContent(t, got[0]); !bytes.Contains([]byte(c), []byte(opsPrompt)) || bytes.Contains([]byte(c), []byte(agent.DefaultSystemPrompt)) {
		t.Errorf("the on-call channel's prompt is not the ops profile's alone: %q", c)
	}
}

// Twenty turns of each of two conversations of the on-call channel, taken
// in turn by two replicas, all send the very same system message bytes:
// the prompt is a function of the profile and the skills alone, not of
// the conversation, the turn, the history or the replica.
func TestTheSystemPromptIsByteIdenticalAcrossTurnsConversationsAndReplicas(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	model := openaitest.New(t)
	ch := newRecorder("slack")
	replicas := []profileReplica{newProfileReplica(t, r, model, ch), newProfileReplica(t, r, model, ch)}
	const turns = 20
	n := 0
	for turn := range turns {
		for c, thread := range []string{"1700000000.000100", "1700000000.000200"} {
			m := msg(thread, fmt.Sprintf("E%d-%d", c, turn), fmt.Sprintf("message %d of conversation %d", turn, c))
			m.Chat = "C_ONCALL"
			if err := replicas[n%2].gw.Submit(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			n++
			ch.wait(t, n)
		}
	}
	got := systemMessages(t, model)
	if len(got) != 2*turns {
		t.Fatalf("%d model requests, want %d", len(got), 2*turns)
	}
	for i, b := range got {
		if !bytes.Equal(b, got[0]) {
			t.Fatalf("request %d's system message differs from the first:\n%s\n%s", i, b, got[0])
		}
	}
	if want := replicas[1].agent.SystemPromptFor(agent.Persona{Name: "ops", Prompt: opsPrompt}, ""); systemContent(t, got[0]) != want {
		t.Errorf("system prompt %q, want the ops profile's %q", systemContent(t, got[0]), want)
	}
	// The histories grew: the requests differ in everything but the
	// system message.
	if raw := model.RawRequests(); bytes.Equal(raw[0], raw[len(raw)-1]) {
		t.Error("the first and last requests are the same; the turns did not run")
	}
}

// A turn paused for an approval resumes with its profile: the request
// after the decision carries the same system message as the one before.
func TestAResumedTurnKeepsItsProfile(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	_, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	ch := newRecorder("slack")
	hour := time.Hour
	withOps := func(g *gateway.Config, _ *agent.Config) {
		level := config.Level{Tools: config.ToolRules{ApproveWrites: new(true), Write: new(true)}, Admins: []string{"UADMIN"}, ApprovalTimeout: &hour, Profile: "ops"}
		g.Policy = policy.New(policy.Config{Platforms: map[string]policy.PlatformPolicy{"slack": {Level: level}}}).
			WithProfiles(&policy.Profiles{ByName: map[string]policy.Profile{"ops": {SystemPrompt: opsPrompt}}})
	}
	a := newApprovalReplicaWith(t, r, mcpURL, model, ch, time.Hour, time.Hour, "slack", withOps)
	b := newApprovalReplicaWith(t, r, mcpURL, model, ch, time.Hour, time.Hour, "slack", withOps)

	submit(t, a.gw, from("U1", "E1", "log deployed v2"))
	p := ch.waitFor(t, 0, "with an approval prompt", isPrompt)
	submit(t, b.gw, from("UADMIN", "E2", "/approve "+ch.at(p).Approval.Code))
	ch.waitFor(t, p, "with the model's answer", textIs("done: appended line 1"))

	got := systemMessages(t, model)
	if len(got) != 2 {
		t.Fatalf("%d model requests, want 2 (the call, and the answer after the approval)", len(got))
	}
	if !bytes.Equal(got[0], got[1]) {
		t.Errorf("the resumed turn's system message differs:\n%s\n%s", got[1], got[0])
	}
	if c := systemContent(t, got[1]); !strings.HasPrefix(c, opsPrompt+"\n\n") {
		t.Errorf("the resumed turn's system prompt is not the ops profile's: %q", c)
	}
}
