package skills_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/skills"
)

func TestRedisStateRoundTrip(t *testing.T) {
	ctx := context.Background()
	r := redistest.New(t)
	st := skills.NewRedisState(r.Client, r.Prefix)
	if d, err := st.Disabled(ctx); err != nil || len(d) != 0 {
		t.Fatalf("fresh state: %v, %v", d, err)
	}
	st.SetDisabled(ctx, "a", true)
	st.SetDisabled(ctx, "b", true)
	st.SetDisabled(ctx, "a", false)
	if d, _ := st.Disabled(ctx); !d["b"] || d["a"] {
		t.Fatalf("disabled = %v", d)
	}
	st.Trust(ctx, "/w/.parley/skills/x/SKILL.md", "sha1")
	if ok, _ := st.Trusted(ctx, "/w/.parley/skills/x/SKILL.md", "sha1"); !ok {
		t.Fatal("trusted fingerprint not found")
	}
	if ok, _ := st.Trusted(ctx, "/w/.parley/skills/x/SKILL.md", "sha2"); ok {
		t.Fatal("a changed file is still trusted")
	}
	// Another replica sees the same state.
	other := skills.NewRedisState(r.Client, r.Prefix)
	if d, _ := other.Disabled(ctx); !d["b"] {
		t.Fatal("state not shared")
	}
}

func TestReloadAnnouncementReachesEveryRegistry(t *testing.T) {
	r := redistest.New(t)
	home := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var regs []*skills.Registry
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	for i := 0; i < 2; i++ {
		reg, err := skills.NewRegistry(skills.Layers{Home: home})
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, reg)
		ready := make(chan struct{})
		go func() {
			skills.WatchReloads(ctx, r.Client, r.Prefix, reg, log, ready, nil)
			done <- struct{}{}
		}()
		<-ready
	}
	t.Cleanup(func() { cancel(); <-done; <-done })
	dir := filepath.Join(skills.UserSkillsDir(home), "fresh")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: fresh\ndescription: New.\n---\nbody\n"), 0o644)
	if err := skills.AnnounceReload(context.Background(), r.Client, r.Prefix); err != nil {
		t.Fatal(err)
	}
	for i, reg := range regs {
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, ok := reg.Catalog().Get("fresh"); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("registry %d never reloaded", i)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
