package skills_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// commandCount counts the commands a client sends.
type commandCount struct{ n atomic.Int64 }

func (c *commandCount) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *commandCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}

// TestWatchedStateIsReadWithoutRedisAndFollowsOtherReplicas: while Watch
// runs, a turn's reads of the skill state cost no round trip, and a change
// made elsewhere (another replica, the CLI) is seen once it is announced.
func TestWatchedStateIsReadWithoutRedisAndFollowsOtherReplicas(t *testing.T) {
	r := redistest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	watched := skills.NewRedisState(r.Client, r.Prefix)
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- watched.Watch(ctx, time.Hour, slog.New(slog.DiscardHandler), ready) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	<-ready

	count := &commandCount{}
	r.Client.AddHook(count)
	for range 100 {
		if d, err := watched.Disabled(ctx); err != nil || len(d) != 0 {
			t.Fatalf("Disabled = %v, %v", d, err)
		}
		if ok, err := watched.Trusted(ctx, "/w/SKILL.md", "sha"); err != nil || ok {
			t.Fatalf("Trusted = %v, %v", ok, err)
		}
	}
	if n := count.n.Load(); n != 0 {
		t.Fatalf("200 reads of a watched state sent %d commands to Redis; want 0", n)
	}

	elsewhere := skills.NewRedisState(r.Client, r.Prefix) // another replica, or `parley skills off`
	if err := elsewhere.SetDisabled(ctx, "noisy", true); err != nil {
		t.Fatal(err)
	}
	if err := elsewhere.Trust(ctx, "/w/SKILL.md", "sha"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		d, _ := watched.Disabled(ctx)
		ok, _ := watched.Trusted(ctx, "/w/SKILL.md", "sha")
		if d["noisy"] && ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watched state never saw the announced change: disabled %v, trusted %v", d, ok)
		}
	}
	// A change made here is seen here at once, announcement or not.
	if err := watched.SetDisabled(ctx, "noisy", false); err != nil {
		t.Fatal(err)
	}
	if d, _ := watched.Disabled(ctx); d["noisy"] {
		t.Fatal("this replica's own change is not in its snapshot")
	}
}
