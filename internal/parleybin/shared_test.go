package parleybin

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeBuild writes a stand-in binary and counts its runs.
func fakeBuild(runs *atomic.Int32) func(string) error {
	return func(out string) error {
		runs.Add(1)
		return os.WriteFile(out, []byte("#!/bin/sh\n"), 0o755)
	}
}

// The test processes of one run ask at once: exactly one builds, and
// every one gets that build. Each caller opens the lock file itself, as a
// process of its own would, so they exclude each other as processes do.
func TestSharedBuildIsMadeOnce(t *testing.T) {
	dir := t.TempDir()
	var runs atomic.Int32
	const callers = 8
	paths := make([]string, callers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			p, err := shared(dir, true, fakeBuild(&runs))
			if err != nil {
				t.Error(err)
			}
			paths[i] = p
		})
	}
	close(start)
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d callers built the binary; want exactly one", n)
	}
	for i, p := range paths {
		if p != paths[0] || p == "" {
			t.Errorf("caller %d got %q; caller 0 got %q", i, p, paths[0])
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "parley-race")); err != nil {
		t.Errorf("the shared build is not where the next process looks: %v", err)
	}
}

// A process asking while another holds the lock (building) waits for it,
// and then takes its binary instead of building one more.
func TestSharedBuildWaitsForTheBuilder(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lock(filepath.Join(dir, "parley-race.lock"))
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	got := make(chan string)
	go func() {
		p, err := shared(dir, true, fakeBuild(&runs))
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	// The "other process" finishes its build, then lets go of the lock.
	if err := fakeBuild(new(atomic.Int32))(filepath.Join(dir, "parley-race")); err != nil {
		t.Fatal(err)
	}
	unlock()
	if p := <-got; p != filepath.Join(dir, "parley-race") {
		t.Errorf("waiter got %q", p)
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("the waiter built the binary again (%d builds)", n)
	}
}

// A build that fails leaves nothing under the binary's name, and the next
// process to ask builds it; a race build and a plain one are apart.
func TestSharedBuildAfterAFailure(t *testing.T) {
	dir := t.TempDir()
	failed := errors.New("compile error")
	if _, err := shared(dir, true, func(out string) error {
		os.WriteFile(out, []byte("half a binary"), 0o755)
		return failed
	}); !errors.Is(err, failed) {
		t.Fatalf("shared = %v; want the build's error", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "parley-race")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed build left a binary for the next process: %v", err)
	}
	var runs atomic.Int32
	for _, race := range []bool{true, true, false} {
		if _, err := shared(dir, race, fakeBuild(&runs)); err != nil {
			t.Fatal(err)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("builds = %d; want 2: the race build again after the failure, and the plain one", n)
	}
}
