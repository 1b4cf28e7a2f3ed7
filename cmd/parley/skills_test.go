package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/console"
	"github.com/parleyhq/parley/config"
)

func skillFile(t *testing.T, dir, name, extra string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	body := "---\nname: " + name + "\ndescription: The " + name + " skill.\n" + extra + "---\nBody of " + name + ".\n"
	if err := os.WriteFile(filepath.Join(dir, name, "SKILL.md"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSkillsListShowsLayersAndOverrides(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	skillFile(t, filepath.Join(home, "skills"), "skill-authoring", "") // the user layer overrides the builtin
	skillFile(t, filepath.Join(home, "skills"), "notes", "")
	skillFile(t, filepath.Join(ws, ".parley", "skills"), "notes", "") // the workspace overrides the user layer
	skillFile(t, filepath.Join(ws, ".parley", "skills"), "repo", "")
	env := mapEnv(map[string]string{"PARLEY_HOME": home, "PARLEY_WORKSPACE": ws})
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"skills", "list", "--json"}, nil, &stdout, &stderr, env); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var list []skillJSON
	if err := json.Unmarshal(stdout.Bytes(), &list); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout.String())
	}
	got := map[string]string{}
	for _, s := range list {
		got[s.Name] = s.Source + "<" + s.Replaced
	}
	want := map[string]string{"skill-authoring": "user<builtin", "notes": "workspace<user", "repo": "workspace<"}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: source<replaces = %q, want %q", name, got[name], w)
		}
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"skills", "list"}, nil, &stdout, &stderr, env); code != 0 {
		t.Fatal(stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "replaces builtin") || !strings.Contains(out, "replaces user") || !strings.Contains(out, "untrusted") {
		t.Fatalf("summary:\n%s", out)
	}
	// trust marks the workspace skill trusted in the same state the bot reads.
	stdout.Reset()
	if code := run(context.Background(), []string{"skills", "trust", "repo"}, nil, &stdout, &stderr, env); code != 0 {
		t.Fatal(stderr.String())
	}
	stdout.Reset()
	run(context.Background(), []string{"skills", "list", "--json"}, nil, &stdout, &stderr, env)
	if !strings.Contains(stdout.String(), `"name": "repo"`) || strings.Count(stdout.String(), `"trusted": false`) != 1 {
		t.Fatalf("after trust:\n%s", stdout.String())
	}
}

func TestSkillsLintExitsNonZeroWithFileAndLine(t *testing.T) {
	dir := t.TempDir()
	skillFile(t, dir, "good", "")
	skillFile(t, dir, "bad", "colour: blue\n")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"skills", "lint", dir}, nil, &stdout, &stderr, mapEnv(nil))
	if code == 0 {
		t.Fatalf("lint passed:\n%s", stdout.String())
	}
	want := filepath.Join(dir, "bad", "SKILL.md") + ":4:"
	if !strings.Contains(stdout.String(), want) || !strings.Contains(stdout.String(), "colour") {
		t.Fatalf("lint output lacks %q:\n%s", want, stdout.String())
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"skills", "lint", filepath.Join(dir, "good")}, nil, &stdout, &stderr, mapEnv(nil)); code != 0 {
		t.Fatalf("a clean skill failed lint:\n%s", stdout.String())
	}
}

func TestPolicyExplainWechat(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"policy", "explain", "--channel", "wechat"}, nil, &stdout, &stderr, mapEnv(map[string]string{"PARLEY_HOME": t.TempDir()}))
	if code != 0 {
		t.Fatal(stderr.String())
	}
	var line string
	for _, l := range strings.Split(stdout.String(), "\n") {
		if strings.Contains(l, "save_skill_reference") {
			line = l
		}
	}
	for _, want := range []string{"write", "DENIED", "tools.write: false", "builtin wechat default"} {
		if !strings.Contains(line, want) {
			t.Fatalf("save_skill_reference line %q lacks %q\n%s", line, want, stdout.String())
		}
	}
}

func TestMetricsShowSkillUsageWithChannelLabels(t *testing.T) {
	model := openaitest.New(t)
	model.Script(openaitest.Tools(openaitest.Call("load_skill", `{"name":"skill-authoring"}`)), openaitest.Text("loaded"))
	env := &environment{ctx: context.Background(), stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard,
		getenv: mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "PARLEY_HOME": t.TempDir(), "PARLEY_WORKSPACE": t.TempDir()})}
	cfg, err := config.Load("", env.getenv)
	if err != nil {
		t.Fatal(err)
	}
	a, err := env.newApp(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	a.gateway.Start()
	t.Cleanup(func() { a.close(context.Background()) })
	ch := console.New("metrics", "tester")
	a.gateway.Register(ch)
	if _, err := ch.Ask(context.Background(), a.gateway, "write me a skill"); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Ask(context.Background(), a.gateway, "/skill:skill-authoring again"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.routes(new(atomic.Bool)))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`parley_skill_loads_total{channel="console",outcome="injected",skill="skill-authoring"} 1`,
		`parley_skill_invocations_total{channel="console",skill="skill-authoring"} 1`,
		`parley_tool_calls_total{channel="console",outcome="ok",tool="load_skill"} 1`,
		`parley_skills{source="builtin",state="enabled"} 2`, // skill-authoring and web-access
		`parley_skill_injection_bytes_count{channel="console",skill="skill-authoring"} 1`,
		`parley_llm_tokens_total{channel="console",kind="prompt"}`,
		`parley_turn_duration_seconds_count{channel="console",outcome="ok"} 2`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestServePrintsTheSkillSummary(t *testing.T) {
	model := openaitest.New(t)
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	env := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "PARLEY_LISTEN": addr, "PARLEY_HOME": t.TempDir(), "PARLEY_WORKSPACE": t.TempDir()})
	var stderr syncBuffer
	go func() { done <- run(ctx, []string{"serve"}, nil, io.Discard, &stderr, env) }()
	waitFor(t, "http://"+addr+"/healthz", &stderr)
	cancel()
	<-done
	if out := stderr.String(); !strings.Contains(out, "skill-authoring") || !strings.Contains(out, "index") {
		t.Errorf("no start-up skill summary:\n%s", out)
	}
}
