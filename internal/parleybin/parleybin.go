// Package parleybin gives tests the parley binary, built once.
//
// Several packages run the real binary (replicas behind one Redis, the
// deployment files' probes, the alert rules against a fresh server).
// Building it cold is the slowest step of a test run, so one `go test`
// run builds it once for all of its test processes: scripts/test names a
// fresh, empty folder in PARLEY_TEST_BUILD_DIR, and the first test that
// asks for the binary builds it there while the others wait on a lock on
// that folder, then every process runs the same file. The build happens
// while `go test` is still compiling other packages, not before it starts,
// and by then the asking package's test build has compiled most of what
// the binary needs, so it is mostly a link. Without the folder (a plain
// `go test ./cmd/parley/`) the first test that asks builds the binary for
// its process, into a folder Remove deletes; a binary named in
// PARLEY_TEST_BINARY is used as is, and nothing is built.
//
// The build is a plain `go build` with the version stamped as the
// Dockerfile stamps it (-X main.version), with -race when the tests run
// with -race: a race build of the binary shares every package the race
// build of the tests compiled and only links, where a plain one compiles
// the whole tree once more (minutes of CPU on two cores, cold), and the
// race detector then watches the processes the end-to-end tests start too.
// It leaves out the Dockerfile's CGO_ENABLED=0 and -trimpath for the same
// reason: the image's settings would compile the whole tree once more. For
// that reason too it takes the -gcflags and -ldflags the test process was
// built with (scripts/test leaves DWARF out), read from its build info.
// The deploy tests check the image's build line separately.
package parleybin

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sync"
	"testing"
)

// Env names a prebuilt binary to use as is.
const Env = "PARLEY_TEST_BINARY"

// DirEnv names the folder scripts/test makes for one run's shared build.
const DirEnv = "PARLEY_TEST_BUILD_DIR"

// Version is stamped into every test build; scripts/test stamps the same,
// so `parley version` prints "parley " + Version whichever built it.
const Version = "v0.0.0-parleytest"

// Package is what is built.
const Package = "github.com/parleyhq/parley/cmd/parley"

var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Path returns the binary: $PARLEY_TEST_BINARY when set, else the one
// built in $PARLEY_TEST_BUILD_DIR by whichever test process of the run
// asked first, else one built for this test process on first use. A set
// variable naming no file fails the test rather than quietly building
// another.
func Path(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(Env); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", Env, p, err)
		}
		return p
	}
	built.once.Do(func() {
		if dir := os.Getenv(DirEnv); dir != "" {
			built.path, built.err = shared(dir, Race, Build)
			if built.err != nil {
				built.err = fmt.Errorf("%s=%s: %w", DirEnv, dir, built.err)
			}
			return
		}
		built.dir, built.err = os.MkdirTemp("", "parley-test-bin-")
		if built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "parley")
		built.err = Build(built.path)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// Build compiles the binary to out, stamped with Version, with the race
// detector when this test process has it.
func Build(out string) error {
	if b, err := exec.Command("go", Args(out, Race)...).CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", Package, err, b)
	}
	return nil
}

// Args are the go command's arguments for a build to out, with -race if
// race, and with this test process's own -gcflags and -ldflags.
func Args(out string, race bool) []string {
	var settings []debug.BuildSetting
	if info, ok := debug.ReadBuildInfo(); ok {
		settings = info.Settings
	}
	return argsFor(out, race, settings)
}

// argsFor is Args for a process built with settings: compiled with other
// -gcflags than the tests, the binary would compile every package again.
func argsFor(out string, race bool, settings []debug.BuildSetting) []string {
	args := []string{"build"}
	if race {
		args = append(args, "-race")
	}
	ldflags := "-X main.version=" + Version
	for _, s := range settings {
		switch s.Key {
		case "-gcflags":
			args = append(args, "-gcflags="+s.Value)
		case "-ldflags":
			ldflags = s.Value + " " + ldflags
		}
	}
	return append(args, "-ldflags", ldflags, "-o", out, Package)
}

// RaceBuilt reports whether the binary at path was built with -race: its
// memory and speed are then the race detector's, several times a plain
// build's.
func RaceBuilt(t testing.TB, path string) bool {
	t.Helper()
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("build settings of %s: %v", path, err)
	}
	for _, s := range info.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// Remove deletes the binary Path built, if it built one. Call it from
// TestMain after m.Run.
func Remove() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}
