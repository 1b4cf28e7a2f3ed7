package parleybin

import (
	"os"
	"path/filepath"
	"runtime/debug"
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

// The binary is compiled and linked with the flags the tests were (under
// scripts/test, without DWARF), so it shares their compiled packages, and
// the version is stamped after the tests' own -ldflags.
func TestBuildTakesTheTestsFlags(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings []debug.BuildSetting
		want     []string
	}{
		{"plain go test", []debug.BuildSetting{{Key: "-race", Value: "true"}},
			[]string{"build", "-race", "-ldflags", "-X main.version=" + Version, "-o", "out", Package}},
		{"scripts/test", []debug.BuildSetting{{Key: "-gcflags", Value: "all=-dwarf=false"}, {Key: "-ldflags", Value: "-w"}, {Key: "-race", Value: "true"}},
			[]string{"build", "-race", "-gcflags=all=-dwarf=false", "-ldflags", "-w -X main.version=" + Version, "-o", "out", Package}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := argsFor("out", true, tc.settings); !slices.Equal(got, tc.want) {
				t.Errorf("args %q; want %q", got, tc.want)
			}
		})
	}
	// And this process's own: whatever -gcflags it was built with.
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Skip("no build info")
	}
	for _, s := range info.Settings {
		if s.Key == "-gcflags" && !slices.Contains(Args("out", Race), "-gcflags="+s.Value) {
			t.Errorf("Args %q leave out this test's -gcflags %q", Args("out", Race), s.Value)
		}
	}
}
