package parleybin

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A binary named in PARLEY_TEST_BINARY is used as is: nothing is built.
func TestPathUsesTheSharedBuild(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "parley")
	if err := os.WriteFile(shared, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(Env, shared)
	if got := Path(t); got != shared {
		t.Fatalf("Path = %s; want the shared build %s", got, shared)
	}
	if built.dir != "" {
		t.Fatalf("Path built a binary of its own in %s", built.dir)
	}
}

// The binary is built with -race exactly when the tests are, and
// RaceBuilt reads that back from a binary's build settings: this test
// process's own.
func TestRaceFollowsTheTests(t *testing.T) {
	if got := slices.Contains(Args("out", Race), "-race"); got != Race {
		t.Errorf("Args builds with -race: %v; the tests run with -race: %v", got, Race)
	}
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	if got := RaceBuilt(t, self); got != Race {
		t.Errorf("RaceBuilt(this test binary) = %v; built with -race: %v", got, Race)
	}
}
