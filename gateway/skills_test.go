package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/skills"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// skillRig is a gateway with skills, skill tools, a policy and several
// channels, on a real Redis and the fake model.
type skillRig struct {
	*rig
	home  string
	chans map[string]*recorder
	state skills.State
	tools *agent.Registry
}

func writeSkillFile(t *testing.T, dir, content string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func newSkillRig(t *testing.T, pol policy.Config, cfg gateway.Config) *skillRig {
	t.Helper()
	home, ws := t.TempDir(), t.TempDir()
	user := skills.UserSkillsDir(home)
	writeSkillFile(t, filepath.Join(user, "deploy"), "---\nname: deploy\ndescription: How to deploy the service safely.\n---\n# Deploy\nRun the canary first.\n")
	writeSkillFile(t, filepath.Join(user, "release-notes"), "---\nname: release-notes\ndescription: Write release notes.\ndisable-model-invocation: true\n---\nGroup changes by area.\n")
	writeSkillFile(t, filepath.Join(user, "field-notes"), "---\nname: field-notes\ndescription: Keep notes on deployments as skill references.\nmetadata:\n  requires-tools: save_skill_reference\n---\nSave what you learn.\n")
	writeSkillFile(t, filepath.Join(skills.WorkspaceSkillsDir(ws), "repo-conventions"), "---\nname: repo-conventions\ndescription: Conventions of this repository.\n---\nUse tabs.\n")
	reg, err := skills.NewRegistry(skills.Layers{Home: home, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	state, _ := skills.OpenFileState(home)

	r := redistest.New(t)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Second})
	model := openaitest.New(t)
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tools := agent.NewRegistry()
	for _, tool := range agent.NewSkillTools(agent.SkillToolsConfig{Home: home, Budget: 16 * 1024, Writer: skills.NewWriter(home)}, m, log).Tools() {
		tools.Register(tool)
	}
	a := agent.New(agent.Config{Model: "test", Timeout: 5 * time.Second, MaxRetries: 0}, agent.NewClient(model.URL(), "sk", nil), tools, m, log)
	cfg.Policy = policy.New(pol)
	cfg.Tools = tools
	cfg.Skills = &gateway.Skills{Registry: reg, State: state}
	gw := gateway.New(cfg, store, a, m, log)
	chans := map[string]*recorder{}
	for _, name := range []string{"console", "slack", "wechat"} {
		chans[name] = newRecorder(name)
		gw.Register(chans[name])
	}
	gw.Start()
	t.Cleanup(func() { gw.Shutdown(context.Background()) })
	return &skillRig{rig: &rig{gw: gw, store: store, model: model, metrics: m, redis: r}, home: home, chans: chans, state: state, tools: tools}
}

func (s *skillRig) say(t *testing.T, channel, user, text string) channels.Reply {
	t.Helper()
	ch := s.chans[channel]
	ch.mu.Lock()
	n := len(ch.got)
	ch.mu.Unlock()
	if err := s.gw.Submit(context.Background(), channels.Message{Channel: channel, Workspace: "W", Chat: "C", User: user, Text: text}); err != nil {
		t.Fatal(err)
	}
	return ch.wait(t, n+1)[n].reply
}

func toolNames(req []string) string { return strings.Join(req, ",") }

func offeredTools(s *skillRig, i int) string {
	var names []string
	for _, tool := range s.model.Requests()[i].Tools {
		names = append(names, tool.Function.Name)
	}
	return toolNames(names)
}

func TestPlatformDefaultsDecideTheWriteTool(t *testing.T) {
	t.Parallel()
	s := newSkillRig(t, policy.Config{}, gateway.Config{})
	s.say(t, "slack", "U1", "hello")
	s.say(t, "wechat", "U1", "hello")
	if got := offeredTools(s, 0); !strings.Contains(got, "save_skill_reference") {
		t.Fatalf("slack offered %s; want save_skill_reference", got)
	}
	if got := offeredTools(s, 1); strings.Contains(got, "save_skill_reference") || !strings.Contains(got, "load_skill") {
		t.Fatalf("wechat offered %s; want load_skill but not save_skill_reference", got)
	}
}

// TestSkillsNeedingUnavailableToolsAreHidden: field-notes requires the
// write tool, which WeChat's policy drops, so only Slack's index lists it;
// each channel's prompt stays the same from turn to turn.
func TestSkillsNeedingUnavailableToolsAreHidden(t *testing.T) {
	t.Parallel()
	s := newSkillRig(t, policy.Config{Default: config.Level{Admins: []string{"wechat:boss"}}}, gateway.Config{})
	for _, ch := range []string{"slack", "wechat", "slack", "wechat"} {
		s.say(t, ch, "U1", "hello")
	}
	reqs := s.model.Requests()
	slack, wechat := reqs[0].Messages[0].Content, reqs[1].Messages[0].Content
	if !strings.Contains(slack, "- field-notes:") || !strings.Contains(slack, "- deploy:") {
		t.Errorf("slack's index lacks field-notes:\n%s", slack)
	}
	if strings.Contains(wechat, "field-notes") || !strings.Contains(wechat, "- deploy:") {
		t.Errorf("wechat's index lists field-notes without its tool:\n%s", wechat)
	}
	if reqs[2].Messages[0].Content != slack || reqs[3].Messages[0].Content != wechat {
		t.Error("a channel's system prompt changed between turns")
	}
	if r := s.say(t, "wechat", "boss", "/skill list"); !strings.Contains(r.Text, "field-notes (user, enabled, hidden here: none of its tools is available)") {
		t.Errorf("/skill list on wechat does not say why field-notes is hidden:\n%s", r.Text)
	}
}

func TestForcedCallOfADeniedToolIsRefusedAndCounted(t *testing.T) {
	t.Parallel()
	s := newSkillRig(t, policy.Config{}, gateway.Config{})
	s.model.Script(
		openaitest.Tools(openaitest.Call("save_skill_reference", `{"name":"deploy","file":"references/x.md","content":"pwned"}`)),
		openaitest.Text("ok"),
	)
	s.say(t, "wechat", "U1", "save a note")
	if v := testutil.ToFloat64(s.metrics.ToolCalls.WithLabelValues("wechat", "save_skill_reference", metrics.OutcomeDenied)); v != 1 {
		t.Fatalf("tool calls{denied} = %v", v)
	}
	if v := testutil.ToFloat64(s.metrics.PolicyDenials.WithLabelValues("wechat", "tool")); v != 1 {
		t.Fatalf("policy denials{tool} = %v", v)
	}
	if _, err := os.Stat(filepath.Join(skills.SupplementDir(s.home, "deploy"), "x.md")); !os.IsNotExist(err) {
		t.Fatalf("the denied write happened (stat err %v)", err)
	}
	last := s.model.Requests()[1].Messages
	if tool := last[len(last)-1]; !strings.Contains(tool.Content, "not available in this conversation") {
		t.Fatalf("the model was not told why: %q", tool.Content)
	}
}

func TestAccessRefusalsNeverReachTheModel(t *testing.T) {
	t.Parallel()
	pol := policy.Config{Platforms: map[string]policy.PlatformPolicy{
		"slack": {Level: config.Level{Access: config.Access{Users: []string{"U-ok"}}, Admins: []string{"U-admin"}}},
	}}
	s := newSkillRig(t, pol, gateway.Config{})
	r := s.say(t, "slack", "U-stranger", "hello?")
	if !r.Notice || !strings.Contains(r.Text, "not available to you") {
		t.Fatalf("refusal = %+v", r)
	}
	// A second message gets no second refusal; a marker from an allowed user
	// shows the queue moved on.
	if err := s.gw.Submit(context.Background(), channels.Message{Channel: "slack", Workspace: "W", Chat: "C", User: "U-stranger", Text: "hello??"}); err != nil {
		t.Fatalf("Submit = %v; a refusal is a reply, not an error", err)
	}
	r = s.say(t, "slack", "U-ok", "hi")
	if r.Text != "echo: hi" {
		t.Fatalf("allowed user got %q", r.Text)
	}
	if n := len(s.chans["slack"].got); n != 2 {
		t.Fatalf("%d replies; want one refusal and one answer", n)
	}
	if n := s.model.RequestCount(); n != 1 {
		t.Fatalf("model saw %d requests; want only the allowed user's", n)
	}
	if v := testutil.ToFloat64(s.metrics.PolicyDenials.WithLabelValues("slack", "access")); v != 2 {
		t.Fatalf("policy denials{access} = %v", v)
	}
	if r := s.say(t, "slack", "U-admin", "/skill list"); !strings.Contains(r.Text, "deploy") {
		t.Fatalf("admin outside the user allowlist was refused: %q", r.Text)
	}
}

func TestSkillAdminCommands(t *testing.T) {
	t.Parallel()
	pol := policy.Config{Default: config.Level{Admins: []string{"console:boss"}}}
	s := newSkillRig(t, pol, gateway.Config{})
	if r := s.say(t, "console", "intern", "/skill off deploy"); !strings.Contains(r.Text, "only an administrator") {
		t.Fatalf("non-admin got %q", r.Text)
	}
	if v := testutil.ToFloat64(s.metrics.PolicyDenials.WithLabelValues("console", "admin")); v != 1 {
		t.Fatalf("policy denials{admin} = %v", v)
	}
	r := s.say(t, "console", "boss", "/skill list")
	for _, want := range []string{"deploy (user, enabled)", "repo-conventions (workspace, enabled, untrusted)", "release-notes (user, enabled, manual only)"} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("/skill list lacks %q:\n%s", want, r.Text)
		}
	}
	if r := s.say(t, "console", "boss", "/skill off deploy"); !strings.Contains(r.Text, "disabled") {
		t.Fatalf("/skill off = %q", r.Text)
	}
	s.model.Script(openaitest.Tools(openaitest.Call("load_skill", `{"name":"deploy"}`)), openaitest.Text("ok"))
	s.say(t, "console", "intern", "deploy it")
	if strings.Contains(s.model.Requests()[0].Messages[0].Content, "deploy:") {
		t.Error("a disabled skill is still in the index")
	}
	if v := testutil.ToFloat64(s.metrics.SkillLoads.WithLabelValues("console", "deploy", metrics.SkillDisabled)); v != 1 {
		t.Fatalf("skill loads{disabled} = %v", v)
	}
	s.say(t, "console", "boss", "/skill on deploy")
	if r := s.say(t, "console", "boss", "/skill trust repo-conventions"); !strings.Contains(r.Text, "trusted") {
		t.Fatalf("/skill trust = %q", r.Text)
	}
	if r := s.say(t, "console", "boss", "/skill list"); !strings.Contains(r.Text, "repo-conventions (workspace, enabled, trusted)") {
		t.Fatalf("after trust: %s", r.Text)
	}
	if r := s.say(t, "console", "boss", "/skill reload"); !strings.Contains(r.Text, "Reloaded: 4 skills") {
		t.Fatalf("/skill reload = %q", r.Text)
	}
}

func TestManualSkillInvocationInjectsIntoTheTurn(t *testing.T) {
	t.Parallel()
	s := newSkillRig(t, policy.Config{}, gateway.Config{})
	r := s.say(t, "console", "u", "/skill:release-notes for v2.1")
	if r.Text != "echo: for v2.1" {
		t.Fatalf("reply = %q", r.Text)
	}
	msgs := s.model.Requests()[0].Messages
	inj, user := msgs[len(msgs)-2], msgs[len(msgs)-1]
	if !strings.HasPrefix(inj.Content, skills.InjectionMarker+"\n## Loaded skill: release-notes") || user.Content != "for v2.1" {
		t.Fatalf("request ends with %q / %q", inj.Content, user.Content)
	}
	if strings.Contains(msgs[0].Content, "release-notes") {
		t.Fatal("a disable-model-invocation skill appears in the index")
	}
	if v := testutil.ToFloat64(s.metrics.SkillInvocations.WithLabelValues("console", "release-notes")); v != 1 {
		t.Fatalf("skill invocations = %v", v)
	}
	h, _ := s.store.History(context.Background(), "console:W:C:")
	if len(h) != 3 || h[0].Kind != sessions.KindInjection {
		t.Fatalf("history = %+v; want injection, user, assistant", h)
	}
	if r := s.say(t, "console", "u", "/skill:repo-conventions"); !strings.Contains(r.Text, "not trusted") {
		t.Fatalf("untrusted manual invocation = %q", r.Text)
	}
}

func TestConsoleTurnLoadsASkillExactlyOnce(t *testing.T) {
	t.Parallel()
	s := newSkillRig(t, policy.Config{}, gateway.Config{})
	for i := 0; i < 2; i++ {
		s.model.Script(openaitest.Tools(openaitest.Call("load_skill", `{"name":"deploy"}`)), openaitest.Text("done"))
		s.say(t, "console", "u", "deploy please")
	}
	h, _ := s.store.History(context.Background(), "console:W:C:")
	n := 0
	for _, m := range h {
		if m.Kind == sessions.KindInjection {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d injections in the history; want exactly 1", n)
	}
	if v := testutil.ToFloat64(s.metrics.SkillLoads.WithLabelValues("console", "deploy", metrics.SkillAlreadyLoaded)); v != 1 {
		t.Fatalf("skill loads{already_loaded} = %v", v)
	}
}

func TestCompactCommandDropsInjections(t *testing.T) {
	t.Parallel()
	s := newSkillRig(t, policy.Config{}, gateway.Config{KeepRounds: 1})
	s.model.Script(openaitest.Tools(openaitest.Call("load_skill", `{"name":"deploy"}`)), openaitest.Text("deployed"))
	s.say(t, "console", "u", "deploy please")
	s.say(t, "console", "u", "thanks")
	s.model.Script(openaitest.Text("The user deployed the service."))
	if r := s.say(t, "console", "u", "/compact"); !strings.Contains(r.Text, "Compacted") {
		t.Fatalf("/compact = %q", r.Text)
	}
	h, _ := s.store.History(context.Background(), "console:W:C:")
	if h[0].Kind != sessions.KindSummary || !strings.Contains(h[0].Content, "deploy. Call load_skill again") {
		t.Fatalf("summary = %+v", h[0])
	}
	for _, m := range h {
		if m.Kind == sessions.KindInjection {
			t.Fatal("an injection survived compaction of its round")
		}
	}
	if v := testutil.ToFloat64(s.metrics.Compactions.WithLabelValues("console", "ok")); v != 1 {
		t.Fatalf("compactions{ok} = %v", v)
	}
}

func TestAutomaticCompactionWhenTheHistoryOutgrowsItsBudget(t *testing.T) {
	t.Parallel()
	s := newSkillRig(t, policy.Config{}, gateway.Config{CompactTokens: 60, KeepRounds: 1})
	s.say(t, "console", "u", strings.Repeat("long words ", 20))
	s.say(t, "console", "u", strings.Repeat("more words ", 20)) // one round: nothing to compact yet
	s.model.Script(openaitest.Text("summary of the long message"), openaitest.Text("answer"))
	if r := s.say(t, "console", "u", "next"); r.Text != "answer" {
		t.Fatalf("reply = %q", r.Text)
	}
	reqs := s.model.Requests()
	turn := reqs[len(reqs)-1].Messages
	if !strings.Contains(turn[1].Content, "summary of the long message") || len(turn) != 5 {
		t.Fatalf("the turn after compaction saw %+v", turn)
	}
}

// TestContextTooLongCompactsTheStoredHistory: a turn the model refuses as
// longer than its context compacts the stored conversation once, under the
// turn's lock, and is asked again; the summary is what the store keeps and
// the turn's messages follow it. When the compacted conversation is still
// too long the user is told to /compact or /reset.
func TestContextTooLongCompactsTheStoredHistory(t *testing.T) {
	t.Parallel()
	const tooLong = `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 8227 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	s := newSkillRig(t, policy.Config{}, gateway.Config{KeepRounds: 1})
	s.say(t, "console", "u", "first question")
	s.say(t, "console", "u", "second question")
	s.model.Script(openaitest.Error(400).WithBody(tooLong), openaitest.Text("summary of the first question"), openaitest.Text("answer"))
	if r := s.say(t, "console", "u", "third question"); r.Text != "answer" {
		t.Fatalf("reply = %q", r.Text)
	}
	h, _ := s.store.History(context.Background(), "console:W:C:")
	if h[0].Kind != sessions.KindSummary || !strings.Contains(h[0].Content, "summary of the first question") {
		t.Fatalf("history starts with %+v; want the summary", h[0])
	}
	if last := h[len(h)-1]; last.Content != "answer" {
		t.Fatalf("history ends with %+v", last)
	}
	if v := testutil.ToFloat64(s.metrics.Compactions.WithLabelValues("console", "ok")); v != 1 {
		t.Fatalf("compactions{ok} = %v", v)
	}

	// Compacted once more, still too long: the turn asks no third time.
	before := s.model.RequestCount()
	s.model.Script(openaitest.Error(400).WithBody(tooLong), openaitest.Text("a shorter summary"), openaitest.Error(400).WithBody(tooLong))
	if r := s.say(t, "console", "u", "fourth question"); r.Text != agent.ContextTooLongReply {
		t.Fatalf("reply = %q; want the advice to /compact or /reset", r.Text)
	}
	if n := s.model.RequestCount() - before; n != 3 {
		t.Fatalf("the refused turn sent %d requests (summary included); want 3", n)
	}
}

// TestEveryMessageObeysTheSizeLimit (issue 12, item 4): the size limit
// comes before every path a message can take, /skill:NAME requests and
// commands included; none reaches the model or the history.
func TestEveryMessageObeysTheSizeLimit(t *testing.T) {
	t.Parallel()
	s := newSkillRig(t, policy.Config{}, gateway.Config{MaxMessageChars: 40})
	long := strings.Repeat("部署", 30)
	for _, text := range []string{
		long,
		"/skill:deploy " + long,
		"/SKILL:Deploy " + long,
		"/skill:deploy\t" + long,
		"/skill:" + long,
		"/help " + long,
		"/compact " + long,
		"/skill show deploy " + long,
	} {
		r := s.say(t, "console", "u", text)
		if !strings.Contains(r.Text, "too long") || !r.Notice {
			t.Errorf("%.20q… got %q; want the size refusal", text, r.Text)
		}
	}
	if n := s.model.RequestCount(); n != 0 {
		t.Fatalf("the model saw %d requests; want 0", n)
	}
	if h, _ := s.store.History(context.Background(), "console:W:C:"); len(h) != 0 {
		t.Fatalf("history = %+v; want nothing stored", h)
	}
	if v := testutil.ToFloat64(s.metrics.MessagesRejected.WithLabelValues("console", "message_too_long")); v != 8 {
		t.Fatalf("rejected{message_too_long} = %v; want 8", v)
	}
}

// TestAdminScopeMatchesBlastRadius (issue 12, item 3): a conversation's
// admin may look at its skills but not change the skills of every chat;
// that needs a global admin (policies.default.admins), matched on the
// platform the entry names; a list of one platform grants nothing on
// another.
func TestAdminScopeMatchesBlastRadius(t *testing.T) {
	t.Parallel()
	pol := policy.Config{
		Default: config.Level{Admins: []string{"slack:U-GLOBAL", "U-BARE"}},
		Platforms: map[string]policy.PlatformPolicy{
			"slack": {Workspaces: map[string]policy.WorkspacePolicy{
				"W": {Chats: map[string]config.Level{"C": {Admins: []string{"U-CHAT"}}}},
			}},
			// The WeChat list names a Slack user, bare and qualified.
			"wechat": {Level: config.Level{Admins: []string{"U-SLACKER", "slack:U-CHAT"}}},
		},
	}
	s := newSkillRig(t, pol, gateway.Config{})
	disabled := func() bool {
		t.Helper()
		d, err := s.state.Disabled(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return d["deploy"]
	}
	const globalOnly = "only a global administrator (policies.default.admins)"
	const noAdmin = "only an administrator of this bot"
	tests := []struct {
		channel, user, text string
		want                string
	}{
		// The chat's admin: its view, not everyone's state.
		{"slack", "U-CHAT", "/skill list", "deploy (user, enabled)"},
		{"slack", "U-CHAT", "/skill show deploy", "deploy — How to deploy"},
		{"slack", "U-CHAT", "/skill off deploy", globalOnly},
		{"slack", "U-CHAT", "/skill trust repo-conventions", globalOnly},
		{"slack", "U-CHAT", "/skill reload", globalOnly},
		{"slack", "U-CHAT", "/compact", "Nothing to compact yet"},
		// The Slack user named in WeChat's list is nobody on Slack, and
		// slack:U-CHAT in WeChat's list adds nothing either.
		{"slack", "U-SLACKER", "/skill list", noAdmin},
		{"wechat", "U-CHAT", "/skill list", noAdmin},
		// A bare id in policies.default names no platform's user.
		{"console", "U-BARE", "/skill off deploy", noAdmin},
		{"slack", "U-BARE", "/skill list", noAdmin},
		// The global admin, named for Slack, changes global state from a
		// chat that has admins of its own; on WeChat the same id is nobody.
		{"wechat", "U-GLOBAL", "/skill off deploy", noAdmin},
		{"slack", "U-GLOBAL", "/skill off deploy", "Skill deploy is now disabled"},
		{"slack", "U-GLOBAL", "/skill trust repo-conventions", "is trusted"},
		{"slack", "U-GLOBAL", "/skill reload", "Reloaded: 4 skills"},
	}
	for _, tt := range tests {
		wasDisabled := disabled()
		r := s.say(t, tt.channel, tt.user, tt.text)
		if !strings.Contains(r.Text, tt.want) {
			t.Errorf("%s %s %q = %q; want %q", tt.channel, tt.user, tt.text, r.Text, tt.want)
		}
		if tt.want == globalOnly || tt.want == noAdmin {
			if disabled() != wasDisabled {
				t.Fatalf("%s %s %q changed the skill state", tt.channel, tt.user, tt.text)
			}
		}
	}
	if !disabled() {
		t.Fatal("the global admin's /skill off did not take")
	}
	if v := testutil.ToFloat64(s.metrics.PolicyDenials.WithLabelValues("slack", "admin")); v != 5 {
		t.Errorf("policy denials{slack,admin} = %v; want 5", v)
	}
}
