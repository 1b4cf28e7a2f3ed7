package live_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/skills"
	"github.com/parleyhq/parley/skills/live"
)

// writeSkill puts a minimal SKILL.md for name under root.
func writeSkill(t *testing.T, root, name string) {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	md := "---\nname: " + name + "\ndescription: The " + name + " skill.\n---\nBody of " + name + ".\n"
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
}

// libraryHome is a home folder with more user skills than the index has
// room for, as each replica or process has its own copy of.
func libraryHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	for i := range 25 {
		writeSkill(t, skills.UserSkillsDir(home), fmt.Sprintf("a%02d", i))
	}
	return home
}

// botIndex is the skill index a turn of lib's process puts in the
// system prompt, as the gateway builds it.
func botIndex(t *testing.T, lib *live.Library) string {
	t.Helper()
	text, _ := (&agent.SkillSet{Catalog: lib.Registry.Catalog()}).Index()
	if text == "" {
		t.Fatal("empty index")
	}
	return text
}

// Two processes (or replicas, or a restart) with the same skills and
// configuration send byte-identical system prompts, however many loads
// were counted in between: the index is the skills' and the
// configuration's, not the load counts', so prompt caches hit across the
// fleet. A reload changes nothing either, and the pins still move it.
func TestSkillIndexDoesNotDriftBetweenProcesses(t *testing.T) {
	ctx := context.Background()
	r := redistest.New(t)
	ws := t.TempDir()
	open := func(o live.Options) *live.Library {
		t.Helper()
		o.Home, o.Workspace, o.Index = libraryHome(t), ws, []string{"a20"}
		lib, err := live.Open(o)
		if err != nil {
			t.Fatal(err)
		}
		return lib
	}
	first := open(live.Options{Redis: r.Client, Prefix: r.Prefix})
	want := botIndex(t, first)
	counts := skills.NewRedisState(r.Client, r.Prefix)
	for range 5 {
		if err := counts.CountUse(ctx, "a24"); err != nil {
			t.Fatal(err)
		}
	}
	if err := counts.CountUse(ctx, "a23"); err != nil {
		t.Fatal(err)
	}
	second := open(live.Options{Redis: r.Client, Prefix: r.Prefix})
	if got := botIndex(t, second); got != want {
		t.Errorf("a second process after loads were counted sends another index:\n%s\nthe first sends:\n%s", got, want)
	}
	if _, err := first.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := botIndex(t, first); got != want {
		t.Errorf("a reload after loads were counted changed the index:\n%s\nbefore:\n%s", got, want)
	}
	if got := botIndex(t, open(live.Options{})); got != want {
		t.Errorf("a process without Redis sends another index:\n%s\nwith Redis:\n%s", got, want)
	}
	if strings.Contains(want, "- a24:") || !strings.Contains(want, "- a20:") {
		t.Errorf("want the pin a20 listed and a24 left out:\n%s", want)
	}
}

// The gauges and the start-up line count the index the system prompt
// holds: a trusted workspace skill is in it, an untrusted one is not.
func TestLibraryCountsOnlyWhatThePromptHolds(t *testing.T) {
	ctx := context.Background()
	home, ws := t.TempDir(), t.TempDir()
	writeSkill(t, skills.WorkspaceSkillsDir(ws), "repo-trusted")
	writeSkill(t, skills.WorkspaceSkillsDir(ws), "repo-untrusted")
	m := metrics.New()
	var logs bytes.Buffer
	lib, err := live.Open(live.Options{Home: home, Workspace: ws, Metrics: m, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c := lib.Registry.Catalog()
	trusted, _ := c.Get("repo-trusted")
	if err := lib.State.Trust(ctx, trusted.Path, trusted.SHA256); err != nil {
		t.Fatal(err)
	}
	set := &agent.SkillSet{Catalog: c, Trusted: func(s *skills.Skill) bool { ok, _ := lib.State.Trusted(ctx, s.Path, s.SHA256); return ok }}
	prompt, _ := set.Index()
	if !strings.Contains(prompt, "- repo-trusted:") || strings.Contains(prompt, "repo-untrusted") {
		t.Fatalf("the prompt's index:\n%s", prompt)
	}
	lib.Observe(ctx)
	if got := testutil.ToFloat64(m.SkillIndexBytes); got != float64(len(prompt)) {
		t.Errorf("parley_skill_index_bytes = %v, the prompt's index is %d bytes", got, len(prompt))
	}
	lib.LogLoaded(ctx)
	indexed := c.Len() - 1 // every skill but the untrusted one
	for _, want := range []string{fmt.Sprintf("indexed=%d ", indexed), fmt.Sprintf("index_bytes=%d ", len(prompt))} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("start-up line lacks %q: %s", want, logs.String())
		}
	}
}
