package admin_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/admin"
	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/channeltest"
	_ "github.com/parleyhq/parley/channels/install" // the platforms policies know
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/skills"
	"github.com/parleyhq/parley/skills/builtin"
	"github.com/parleyhq/parley/triggers"
	"github.com/parleyhq/parley/triggers/schedule"
	"github.com/parleyhq/parley/triggers/webhook"
)

const testToken = "correct-horse-battery-staple"

// world is what replicas share: one Redis, one model, the skill folders.
type world struct {
	redis     *redistest.Redis
	model     *openaitest.Server
	home      string
	workspace string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{redis: redistest.New(t), model: openaitest.New(t), home: t.TempDir(), workspace: t.TempDir()}
	writeSkill(t, skills.UserSkillsDir(w.home), "release-notes", "Writes release notes from a list of changes.", "# Release notes\n\nGroup the changes by kind.\n")
	writeSkill(t, skills.WorkspaceSkillsDir(w.workspace), "deploy-check", "Checks a deployment before it goes out.", "# Deploy check\n\nRun the checklist in references/checklist.md.\n")
	ref := filepath.Join(skills.WorkspaceSkillsDir(w.workspace), "deploy-check", "references")
	if err := os.MkdirAll(ref, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ref, "checklist.md"), []byte("1. Tests green\n2. <b>Rollback</b> plan ready\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

func writeSkill(t *testing.T, root, name, desc, body string) {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("---\nname: %s\ndescription: %s\n---\n%s", name, desc, body)
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replica is one Parley process as the console sees it: its own registry,
// skill state (following Redis), store, gateway and console, and its
// heartbeat.
type replica struct {
	id      string
	store   *sessions.RedisStore
	reg     *skills.Registry
	state   *skills.RedisState
	gw      *gateway.Gateway
	ch      *recorder
	metrics *metrics.Metrics
	console *admin.Server
	srv     *httptest.Server
	log     *channeltest.LogBuffer
	clock   *clock
}

type options struct {
	admin func(*config.Admin)
	// listen wraps the console's listener (a TLS server, say).
	tls bool
	// accounts are the replica's accounts as the console reads them, and
	// channels the adapters its heartbeat reports (nil: one slack, ready).
	accounts admin.Accounts
	channels []admin.ChannelHealth
}

type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

func (w *world) replica(t *testing.T, id string, opts options) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	t.Cleanup(func() { cancel(); bg.Wait() })

	logs := &channeltest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, testWriter{t}), nil))
	r := &replica{id: id, log: logs, clock: &clock{}, metrics: metrics.New()}
	r.store = sessions.NewRedis(w.redis.Client, sessions.Options{Prefix: w.redis.Prefix})
	var err error
	r.reg, err = skills.NewRegistry(skills.Layers{Builtin: builtin.FS, Home: w.home, Workspace: w.workspace})
	if err != nil {
		t.Fatal(err)
	}
	r.state = skills.NewRedisState(w.redis.Client, w.redis.Prefix)
	ready := make(chan struct{})
	bg.Go(func() { _ = r.state.Watch(ctx, time.Minute, log, ready) })
	<-ready

	reg := agent.NewRegistry()
	for _, tool := range agent.NewSkillTools(agent.SkillToolsConfig{Home: w.home, Budget: config.DefaultSkillBodyBudget, Writer: skills.NewWriter(w.home)}, r.metrics, log).Tools() {
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	ag := agent.New(agent.Config{Model: "test-model"}, agent.NewClient(w.model.URL(), "sk-test", nil), reg, r.metrics, log)
	r.gw = gateway.New(gateway.Config{
		Workers: 2, KeepRounds: 1, SkillBudget: config.DefaultSkillBodyBudget,
		Policy: policy.New(policy.Config{}), Tools: reg,
		Skills: &gateway.Skills{Registry: r.reg, State: r.state},
	}, r.store, ag, r.metrics, log)
	r.ch = newRecorder("slack")
	r.gw.Register(r.ch)
	r.gw.Start()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = r.gw.Shutdown(sctx)
	})

	ac := config.Admin{Token: config.Secret(testToken), SessionTTL: time.Hour, GrafanaURL: "http://grafana.example:3000/d/parley"}
	if opts.admin != nil {
		opts.admin(&ac)
	}
	r.console, err = admin.New(admin.Config{
		Admin: ac, Redis: w.redis.Client, Prefix: w.redis.Prefix, Store: r.store,
		Skills: admin.Skills{Registry: r.reg, State: r.state, Home: w.home},
		Policy: policy.New(policy.Config{Platforms: map[string]policy.PlatformPolicy{"slack": {
			Level:      config.Level{Tools: config.ToolRules{Deny: []string{"save_*"}}},
			Workspaces: map[string]policy.WorkspacePolicy{"T1": {Chats: map[string]config.Level{"C_ONCALL": {Profile: "ops"}}}},
		}}}).WithProfiles(&policy.Profiles{ByName: map[string]policy.Profile{"ops": {DisplayName: consoleProfileName, SystemPrompt: "Be terse."}}}),
		Tools:         registryTools{reg},
		Conversations: r.gw,
		Triggers:      triggerLister(t, w),
		Accounts:      opts.accounts,
		Replica:       id,
		Log:           log,
		Now:           r.clock.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	if opts.tls {
		r.srv = httptest.NewTLSServer(r.console)
	} else {
		r.srv = httptest.NewServer(r.console)
	}
	t.Cleanup(r.srv.Close)

	beat := opts.channels
	if beat == nil {
		beat = []admin.ChannelHealth{{Name: "slack", Ready: true}}
	}
	hb := &admin.Heartbeat{Client: w.redis.Client, Prefix: w.redis.Prefix, Every: time.Second, Gatherer: r.metrics.Registry, Log: log,
		Info: func() admin.ReplicaInfo {
			return admin.ReplicaInfo{ID: id, Host: "host-" + id, Version: "test", Started: time.Now().Add(-time.Minute),
				Channels: beat, Console: r.srv.URL}
		}}
	hbReady := make(chan struct{})
	bg.Go(func() { hb.Run(ctx, hbReady) })
	<-hbReady
	return r
}

// registryTools lists a registry's tools the way the CLI lists builtin
// ones (no MCP servers in these tests).
type registryTools struct{ reg *agent.Registry }

func (r registryTools) ToolStatuses() []admin.ToolStatus {
	var out []admin.ToolStatus
	for _, t := range r.reg.All() {
		class := "read"
		if t.Writes() {
			class = "write"
		}
		out = append(out, admin.ToolStatus{Name: t.Name(), Source: policy.SourceBuiltin, Class: class})
	}
	return out
}

func (r registryTools) PolicyTools() []policy.ToolInfo {
	var out []policy.ToolInfo
	for _, t := range r.reg.All() {
		out = append(out, policy.ToolInfo{Name: t.Name(), Writes: t.Writes()})
	}
	return out
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// recorder is a channel that keeps what the gateway sends.
type recorder struct {
	name string
	mu   sync.Mutex
	got  []string
}

func newRecorder(name string) *recorder { return &recorder{name: name} }

func (r *recorder) Name() string { return r.name }

func (r *recorder) Send(_ context.Context, _ channels.Message, rep channels.Reply) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rep.Text)
	return nil
}

func (r *recorder) replies() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// poll waits for cond until the deadline.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// converse runs one real turn on r's gateway in which the model loads a
// skill (a tool result and an injection) and answers.
func (w *world) converse(t *testing.T, r *replica, chat, skill string) string {
	t.Helper()
	before := r.ch.replies()
	w.model.Script(
		openaitest.Tools(openaitest.Call("load_skill", fmt.Sprintf(`{"name":%q}`, skill))),
		openaitest.Text("Here are your notes."),
	)
	m := channels.Message{ID: "m-" + chat, Channel: "slack", Workspace: "T1", Chat: chat, Thread: "1.0", User: "U1", Text: "write the release notes", Received: time.Now()}
	if err := r.gw.Submit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	poll(t, "the reply", func() bool { return r.ch.replies() > before })
	return m.ConversationKey()
}

// browser is an HTTP client with a cookie jar, signed in or not.
type client struct {
	t    *testing.T
	base string
	http *http.Client
}

func (r *replica) client(t *testing.T) *client {
	jar, _ := cookiejar.New(nil)
	hc := *r.srv.Client() // a copy: each client has its own jar
	hc.Jar = jar
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &client{t: t, base: r.srv.URL, http: &hc}
}

type response struct {
	status int
	header http.Header
	body   string
}

func (c *client) do(req *http.Request) response {
	c.t.Helper()
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func (c *client) get(path string, header ...string) response {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.base+path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return c.do(req)
}

func (c *client) post(path string, form url.Values, header ...string) response {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return c.do(req)
}

// signIn signs c in with the token and returns the CSRF token of its
// session, read from a page's form.
func (c *client) signIn() string {
	c.t.Helper()
	resp := c.post("/admin/login", url.Values{"token": {testToken}})
	if resp.status != http.StatusSeeOther || resp.header.Get("Location") != "/admin/" {
		c.t.Fatalf("sign-in: %d %s", resp.status, resp.body)
	}
	return c.csrf()
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`)

func (c *client) csrf() string {
	c.t.Helper()
	page := c.get("/admin/skills")
	m := csrfRE.FindStringSubmatch(page.body)
	if m == nil {
		c.t.Fatalf("no CSRF token on the skills page (%d): %s", page.status, page.body)
	}
	return m[1]
}

func messageFor(chat string, i int) channels.Message {
	return channels.Message{ID: fmt.Sprintf("m-%s-%d", chat, i), Channel: "slack", Workspace: "T1", Chat: chat, Thread: "1.0", User: "U1", Text: fmt.Sprintf("question %d", i), Received: time.Now()}
}

// testWebhooks are the world's webhooks: an Alertmanager one and a json
// one, each posting to C1.
func testWebhooks(t *testing.T) webhook.Webhooks {
	t.Helper()
	to := triggers.Destination{Platform: "slack", Workspace: "T1", Chat: "C1"}
	hooks := webhook.Webhooks{
		"am":     {Kind: webhook.KindAlertmanager, Token: config.Secret("am-t0ken-never-shown"), To: to},
		"deploy": {Kind: webhook.KindJSON, Token: config.Secret("deploy-t0ken-never-shown"), Text: "{{.service}} deployed", To: to},
	}
	if err := hooks.Validate(); err != nil {
		t.Fatal(err)
	}
	return hooks
}

// worldTriggers lists the triggers of the world's Redis as the binary's
// lister does: the schedules, then the webhooks.
type worldTriggers struct {
	schedule.Lister
	hooks webhook.Lister
}

func (l worldTriggers) Webhooks(ctx context.Context) ([]webhook.Status, error) {
	return l.hooks.Statuses(ctx)
}

// triggerLister lists the triggers of the world's Redis: a digest of the
// configuration, and testWebhooks.
func triggerLister(t *testing.T, w *world) worldTriggers {
	conf := schedule.DefaultConfig()
	conf.Schedules = map[string]*schedule.Schedule{"digest": {Cron: "0 9 * * 1-5", Answer: triggers.AnswerPost, Text: "x",
		To: triggers.Destination{Platform: "slack", Workspace: "T1", Chat: "C1"}}}
	return worldTriggers{
		Lister: schedule.Lister{Config: conf, Chats: schedule.NewChats(w.redis.Client, w.redis.Prefix, conf, nil), Claims: schedule.NewClaims(w.redis.Client, w.redis.Prefix)},
		hooks:  webhook.Lister{Webhooks: testWebhooks(t), Redis: w.redis.Client, Prefix: w.redis.Prefix},
	}
}
