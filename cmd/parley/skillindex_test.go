package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/console"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/skills"
	"github.com/parleyhq/parley/skills/builtin"
)

// startIndexApp starts a bot of vars' configuration, as one process of a
// fleet, with a console channel of its own.
func startIndexApp(t *testing.T, vars map[string]string, name string) (*app, *console.Adapter) {
	t.Helper()
	env := &environment{ctx: context.Background(), stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, getenv: mapEnv(vars)}
	cfg, err := config.Load("", env.getenv)
	if err != nil {
		t.Fatal(err)
	}
	a, err := env.newApp(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	a.gateway.Start()
	t.Cleanup(func() { a.close(context.Background()) })
	ch := console.New(name, "tester", console.Options{})
	a.gateway.Register(ch)
	return a, ch
}

// The index rule end to end, on Redis, across processes: with more skills
// than fit, the builtins come first, then skills.index, then by name. Two
// processes with the same skills and configuration send byte-identical
// system prompts although loads were counted between their starts (the
// counts once reordered the index of the one started later, and of a
// reload); the prompt says how many were left out. skills list shows the
// counts and suggests the pin that would list the most loaded skill.
func TestSystemPromptDoesNotDriftBetweenProcesses(t *testing.T) {
	r := redistest.New(t)
	model := openaitest.New(t)
	home := t.TempDir()
	for i := range 25 {
		skillFile(t, filepath.Join(home, "skills"), fmt.Sprintf("a%02d", i), "")
	}
	vars := map[string]string{"OPENAI_BASE_URL": model.URL(), "PARLEY_HOME": home, "PARLEY_WORKSPACE": t.TempDir(), "REDIS_URL": r.URL,
		"PARLEY_CONFIG": writeConfig(t, fmt.Sprintf("redis:\n  prefix: %q\nskills:\n  index: [a20]\n", r.Prefix))}
	first, ch := startIndexApp(t, vars, "index-first")
	listed, _ := first.skills.Registry.Catalog().IndexListing(nil)
	if want := []string{"skill-authoring", "web-access", "a20", "a00"}; !slices.Equal(listed[:4], want) {
		t.Fatalf("index starts %v, want %v", listed[:4], want)
	}
	for range 2 {
		model.Script(openaitest.Tools(openaitest.Call("load_skill", `{"name":"a24"}`)), openaitest.Text("done"))
		if _, err := ch.Ask(context.Background(), first.gateway, "/reset"); err != nil {
			t.Fatal(err)
		}
		if _, err := ch.Ask(context.Background(), first.gateway, "use a24"); err != nil {
			t.Fatal(err)
		}
	}
	want := model.Requests()[0].Messages[0].Content
	if !strings.Contains(want, "7 more skills are not listed here; find_skills(query) searches every skill.") {
		t.Errorf("the prompt does not say what the index left out:\n%s", want)
	}
	if strings.Contains(want, "- a24:") {
		t.Errorf("a24 is indexed, though neither a builtin nor pinned:\n%s", want)
	}
	if _, err := first.skills.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	second, ch2 := startIndexApp(t, vars, "index-second")
	for _, p := range []struct {
		name string
		a    *app
		ch   *console.Adapter
	}{{"the first process, reloaded", first, ch}, {"a second process", second, ch2}} {
		model.Script(openaitest.Text("hello"))
		if _, err := p.ch.Ask(context.Background(), p.a.gateway, "hi"); err != nil {
			t.Fatal(err)
		}
		reqs := model.Requests()
		if got := reqs[len(reqs)-1].Messages[0].Content; got != want {
			t.Errorf("%s, after loads were counted, sends another system prompt:\n%s\nwant:\n%s", p.name, got, want)
		}
	}
	var stdout bytes.Buffer
	if code := run(context.Background(), []string{"skills", "list"}, nil, &stdout, io.Discard, mapEnv(vars)); code != 0 {
		t.Fatal("skills list failed")
	}
	out := stdout.String()
	for _, want := range []string{"find_skills only, 2 loads", "indexed", "The index lists 20 skill(s)", skills.IndexRule,
		"Loaded often but left out of the index: a24 (2 loads). To list them, pin them: skills.index: [a20, a24]"} {
		if !strings.Contains(out, want) {
			t.Errorf("skills list lacks %q:\n%s", want, out)
		}
	}
}

// An untrusted workspace skill is never in the system prompt's index, so
// skills list marks it find_skills only (untrusted), leaves it out of the
// index's count and size (in text and JSON), and calls it indexed once an
// admin trusts it.
func TestSkillsListShowsUntrustedWorkspaceSkillAsFindSkillsOnly(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	skillFile(t, filepath.Join(ws, ".parley", "skills"), "repo", "")
	env := mapEnv(map[string]string{"PARLEY_HOME": home, "PARLEY_WORKSPACE": ws})
	list := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append([]string{"skills"}, args...), nil, &stdout, &stderr, env); code != 0 {
			t.Fatalf("skills %v: exit %d: %s", args, code, stderr.String())
		}
		return stdout.String()
	}
	builtinOnly, err := skills.Load(skills.Layers{Builtin: builtin.FS, Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	builtins := builtinOnly.Len()
	out := list("list")
	if !strings.Contains(out, "enabled, find_skills only (untrusted)") || strings.Contains(out, "untrusted, indexed") {
		t.Errorf("the untrusted workspace skill is not marked find_skills only (untrusted):\n%s", out)
	}
	if want := fmt.Sprintf("The index lists %d skill(s)", builtins); !strings.Contains(out, want) {
		t.Errorf("want %q, the skills the prompt holds:\n%s", want, out)
	}
	var before skillsListJSON
	if err := json.Unmarshal([]byte(list("list", "--json")), &before); err != nil {
		t.Fatal(err)
	}
	for _, s := range before.Skills {
		if s.Name == "repo" && s.Indexed {
			t.Error("JSON calls the untrusted workspace skill indexed")
		}
	}
	list("trust", "repo")
	out = list("list")
	if !strings.Contains(out, "enabled, trusted, indexed") || !strings.Contains(out, fmt.Sprintf("The index lists %d skill(s)", builtins+1)) {
		t.Errorf("after trust:\n%s", out)
	}
}
