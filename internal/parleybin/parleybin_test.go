package parleybin

import (
	"os"
	"path/filepath"
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
