package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/console"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/skills"
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
	var list skillsListJSON
	if err := json.Unmarshal(stdout.Bytes(), &list); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout.String())
	}
	got := map[string]string{}
	for _, s := range list.Skills {
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
	ch := console.New("metrics", "tester", console.Options{})
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
		`parley_llm_tokens_total{channel="console",kind="prompt",model="default"}`,
		`parley_turn_duration_seconds_count{channel="console",outcome="ok"} 2`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// brokenLibrary writes n skills to the user layer of home, every third one
// without a description (skipped) and every other one with a field of the
// wrong shape (a warning), as a large downloaded library has.
func brokenLibrary(t *testing.T, home string, n int) (skipped, warned int) {
	t.Helper()
	for i := range n {
		name := fmt.Sprintf("library-skill-%03d", i)
		extra := ""
		if i%2 == 0 {
			extra = "version: [1]\n"
		}
		switch {
		case i%3 == 0:
			dir := filepath.Join(home, "skills", name)
			os.MkdirAll(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: "+name+"\n---\nNo description.\n"), 0o644)
			skipped++
		default:
			skillFile(t, filepath.Join(home, "skills"), name, extra)
			if extra != "" {
				warned++
			}
		}
	}
	return skipped, warned
}

// Serve reports the skills in one line of counts, however large the
// library: the per-skill table (and the list of skills left out of the
// index) made a line of hundreds of kilobytes.
func TestServeLogsOneSkillSummaryLine(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			model := openaitest.New(t)
			addr := freeAddr(t)
			home := t.TempDir()
			skipped, _ := brokenLibrary(t, home, 300)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			env := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "PARLEY_LISTEN": addr, "PARLEY_HOME": home,
				"PARLEY_WORKSPACE": t.TempDir(), "PARLEY_LOG_FORMAT": format})
			var stderr syncBuffer
			go func() { done <- run(ctx, []string{"serve"}, nil, io.Discard, &stderr, env) }()
			waitFor(t, "http://"+addr+"/healthz", &stderr)
			cancel()
			<-done
			out := stderr.String()
			var line string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "skills loaded") {
					if line != "" {
						t.Fatalf("two summary lines:\n%s", out)
					}
					line = l
				}
				if len(l) > 1024 {
					t.Errorf("a %d-byte log line: %.200s…", len(l), l)
				}
			}
			total := 300 - skipped + 2 // and the two builtins
			for _, want := range []string{fmt.Sprint(total), "indexed", "20", "left_out_of_index", fmt.Sprint(total - 20), "skipped", fmt.Sprint(skipped), "index_bytes"} {
				if !strings.Contains(line, want) {
					t.Errorf("summary line lacks %q: %s", want, line)
				}
			}
			if strings.Contains(out, "library-skill-150") {
				t.Errorf("serve listed skills one by one:\n%.2000s", out)
			}
		})
	}
}

// A chat run says in one line that the skills had warnings; --verbose
// lists them all.
func TestChatSummarisesSkillWarnings(t *testing.T) {
	model := openaitest.New(t)
	home := t.TempDir()
	skipped, warned := brokenLibrary(t, home, 60)
	env := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "PARLEY_HOME": home, "PARLEY_WORKSPACE": t.TempDir()})
	skillLines := func(args ...string) []string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append([]string{"chat", "-m", "hello"}, args...), nil, &stdout, &stderr, env); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		var out []string
		for _, l := range strings.Split(stderr.String(), "\n") {
			if strings.Contains(l, "skills: ") {
				out = append(out, l)
			}
		}
		return out
	}
	lines := skillLines()
	if len(lines) != 1 || !strings.Contains(lines[0], fmt.Sprintf("%d warnings", skipped+warned)) ||
		!strings.Contains(lines[0], fmt.Sprintf("%d skills skipped", skipped)) || !strings.Contains(lines[0], "--verbose") {
		t.Errorf("want one summary line, got %d:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if lines := skillLines("--verbose"); len(lines) != skipped+warned {
		t.Errorf("--verbose: %d lines, want %d", len(lines), skipped+warned)
	}
}

// skills list names every skipped skill with its reason, on stderr and in
// --json, and counts the other warnings unless --verbose.
func TestSkillsListReportsSkippedSkills(t *testing.T) {
	home := t.TempDir()
	skillFile(t, filepath.Join(home, "skills"), "fine", "")
	skillFile(t, filepath.Join(home, "skills"), "shaky", "version: [1]\n")
	os.MkdirAll(filepath.Join(home, "skills", "nodesc"), 0o755)
	os.WriteFile(filepath.Join(home, "skills", "nodesc", "SKILL.md"), []byte("---\nname: nodesc\n---\n"), 0o644)
	os.MkdirAll(filepath.Join(home, "skills", "lower"), 0o755)
	os.WriteFile(filepath.Join(home, "skills", "lower", "skill.md"), []byte("---\nname: lower\ndescription: d\n---\n"), 0o644)
	env := mapEnv(map[string]string{"PARLEY_HOME": home, "PARLEY_WORKSPACE": t.TempDir()})
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"skills", "list"}, nil, &stdout, &stderr, env); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	errOut := stderr.String()
	for _, want := range []string{"2 skills skipped:", "nodesc", "missing description", "lower", "must be named SKILL.md", "1 warning in loaded skills", "--verbose"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	stderr.Reset()
	run(context.Background(), []string{"skills", "list", "--verbose"}, nil, io.Discard, &stderr, env)
	if !strings.Contains(stderr.String(), "version: expected a string") {
		t.Errorf("--verbose does not show the warning:\n%s", stderr.String())
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"skills", "list", "--json"}, nil, &stdout, io.Discard, env); code != 0 {
		t.Fatal("list --json failed")
	}
	var list skillsListJSON
	if err := json.Unmarshal(stdout.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Skipped) != 2 || len(list.Warnings) != 1 || list.Skipped[0].Message == "" || strings.HasPrefix(list.Skipped[0].Message, "skill skipped") {
		t.Errorf("json skipped %+v warnings %+v", list.Skipped, list.Warnings)
	}
}

// skills lint with no argument lints the user and workspace layers; on a
// fresh install neither folder exists, and that is not a problem.
func TestSkillsLintPassesOnACleanInstall(t *testing.T) {
	env := mapEnv(map[string]string{"PARLEY_HOME": filepath.Join(t.TempDir(), "fresh"), "PARLEY_WORKSPACE": t.TempDir()})
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"skills", "lint"}, nil, &stdout, &stderr, env); code != 0 {
		t.Fatalf("lint on a clean install: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "no problems") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	// A path to a SKILL.md is accepted too.
	dir := t.TempDir()
	skillFile(t, dir, "good", "")
	skillFile(t, dir, "bad", "colour: blue\n")
	stdout.Reset()
	if code := run(context.Background(), []string{"skills", "lint", filepath.Join(dir, "good", "SKILL.md")}, nil, &stdout, &stderr, env); code != 0 {
		t.Errorf("lint good/SKILL.md: exit %d\n%s", code, stdout.String())
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"skills", "lint", filepath.Join(dir, "bad", "SKILL.md")}, nil, &stdout, &stderr, env); code == 0 || !strings.Contains(stdout.String(), "bad/SKILL.md:4:") {
		t.Errorf("lint bad/SKILL.md: exit %d\n%s", code, stdout.String())
	}
}

// scrape returns the value of the series named exactly by series.
func scrape(t *testing.T, url, series string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f, true
		}
	}
	return 0, false
}

// parley_skills and parley_skill_index_bytes are right before the first
// turn, and after `parley skills off` run from another process, with the
// skill state in a file and in Redis.
func TestSkillMetricsRightFromStartAndAfterSkillsOff(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	for _, store := range []string{"file", "redis"} {
		t.Run(store, func(t *testing.T) {
			model := openaitest.New(t)
			vars := map[string]string{"OPENAI_BASE_URL": model.URL(), "PARLEY_HOME": t.TempDir(), "PARLEY_WORKSPACE": t.TempDir()}
			if store == "redis" {
				r := redistest.New(t)
				vars["REDIS_URL"], vars["PARLEY_CONFIG"] = r.URL, writeConfig(t, fmt.Sprintf("redis:\n  prefix: %q\n", r.Prefix))
			}
			skillFile(t, filepath.Join(vars["PARLEY_HOME"], "skills"), "notes", "")
			env := &environment{ctx: context.Background(), stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, getenv: mapEnv(vars)}
			cfg, err := config.Load("", env.getenv)
			if err != nil {
				t.Fatal(err)
			}
			a, err := env.newApp(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.close(context.Background()) })
			srv := httptest.NewServer(a.routes(new(atomic.Bool)))
			defer srv.Close()
			indexOf := func(disabled map[string]bool) float64 {
				text, _ := a.skills.Registry.Catalog().Index(func(s *skills.Skill) bool { return !disabled[s.Name] })
				return float64(len(text))
			}
			// Before any turn.
			if v, _ := scrape(t, srv.URL+"/metrics", "parley_skill_index_bytes"); v == 0 || v != indexOf(nil) {
				t.Errorf("index bytes at start = %v, want %v", v, indexOf(nil))
			}
			if v, _ := scrape(t, srv.URL+"/metrics", `parley_skills{source="user",state="enabled"}`); v != 1 {
				t.Errorf("user enabled at start = %v", v)
			}
			if code := run(context.Background(), []string{"skills", "off", "notes"}, nil, io.Discard, io.Discard, mapEnv(vars)); code != 0 {
				t.Fatal("skills off failed")
			}
			want := indexOf(map[string]bool{"notes": true})
			deadline := time.Now().Add(10 * time.Second) // the Redis state arrives by pub/sub
			for {
				idx, _ := scrape(t, srv.URL+"/metrics", "parley_skill_index_bytes")
				off, _ := scrape(t, srv.URL+"/metrics", `parley_skills{source="user",state="disabled"}`)
				on, _ := scrape(t, srv.URL+"/metrics", `parley_skills{source="user",state="enabled"}`)
				if idx == want && off == 1 && on == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after skills off: index bytes %v (want %v), user disabled %v, enabled %v", idx, want, off, on)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// skills show prints the body, read from disk (the catalog keeps only the
// frontmatter), and list --json its size.
func TestSkillsShowPrintsTheBodyFromDisk(t *testing.T) {
	home := t.TempDir()
	skillFile(t, filepath.Join(home, "skills"), "notes", "")
	env := mapEnv(map[string]string{"PARLEY_HOME": home, "PARLEY_WORKSPACE": t.TempDir()})
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"skills", "show", "notes"}, nil, &stdout, &stderr, env); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.HasSuffix(stdout.String(), "\n\nBody of notes.\n") {
		t.Fatalf("skills show:\n%s", stdout.String())
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"skills", "list", "--json"}, nil, &stdout, &stderr, env); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), `"body_bytes": 15`) {
		t.Fatalf("list --json does not give the body's 15 bytes:\n%s", stdout.String())
	}
}
