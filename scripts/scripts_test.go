package scripts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/parleybin"
)

// repoRoot is the top of the git checkout this package is in.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout (%v): file modes are a property of the commit", err)
	}
	return strings.TrimSpace(string(out))
}

// TestScriptsAreCommittedExecutable reads the modes git records, not the
// work tree's: a fresh clone gets what the index says, and `.ci/run` or
// `scripts/test` committed 100644 fails with "permission denied" there even
// though it runs in the tree of whoever committed it.
func TestScriptsAreCommittedExecutable(t *testing.T) {
	root := repoRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "-s").Output()
	if err != nil {
		t.Fatalf("git ls-files -s: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// <mode> <object> <stage>\t<path>
		meta, path, ok := strings.Cut(line, "\t")
		fields := strings.Fields(meta)
		if !ok || len(fields) != 3 {
			t.Fatalf("unexpected git ls-files -s line %q", line)
		}
		if !isScript(t, root, path) {
			continue
		}
		checked++
		if mode := fields[0]; mode != "100755" {
			t.Errorf("%s is committed with mode %s; run `git update-index --chmod=+x %s`", path, mode, path)
		}
	}
	if checked < 2 {
		t.Errorf("found %d scripts; expected at least .ci/run and scripts/test", checked)
	}
}

// isScript: everything in .ci/ and scripts/ but Go files, and any file that
// starts with a #! line.
func isScript(t *testing.T, root, path string) bool {
	t.Helper()
	if strings.HasSuffix(path, ".go") {
		return false
	}
	if strings.HasPrefix(path, ".ci/") || strings.HasPrefix(path, "scripts/") {
		return true
	}
	f, err := os.Open(filepath.Join(root, path))
	if err != nil {
		return false // deleted in the work tree, or a submodule
	}
	defer f.Close()
	head := make([]byte, 2)
	n, _ := f.Read(head)
	return bytes.Equal(head[:n], []byte("#!"))
}

// scripts/test leaves the binary the tests share to internal/parleybin,
// the only place it is built (so the build a test gets is the same under
// scripts/test and in a plain `go test`): it exports a fresh folder for
// the run's shared build, and runs the tests with -race, which that build
// follows.
func TestScriptsTestSharesParleybinsBuild(t *testing.T) {
	b, err := os.ReadFile("test")
	if err != nil {
		t.Fatal(err)
	}
	script := strings.ReplaceAll(string(b), "\\\n", " ")
	for _, l := range strings.Split(script, "\n") {
		if strings.Contains(l, "go build") && !strings.HasPrefix(strings.TrimSpace(l), "#") {
			t.Errorf("scripts/test builds the binary itself (%s); the tests' first ask builds it (internal/parleybin), while go test compiles the rest", strings.TrimSpace(l))
		}
	}
	if !strings.Contains(script, "\ngo test -race ") {
		t.Error("scripts/test does not run `go test -race`")
	}
	// Two actions and two tests per core: one per core, go test's default,
	// left a cold run's two cores idle a third of the time.
	if !strings.Contains(script, `-p "$per_core" -parallel "$per_core" "$@"`) {
		t.Error(`scripts/test does not run go test with -p and -parallel at two per core, before the arguments it was given`)
	}
	// .ci/run compiles ahead what the tests then reuse: only with the
	// same compiler flags.
	gcflags := regexp.MustCompile(`-gcflags=\S+`)
	testFlags := ""
	if i := strings.Index(script, "\ngo test -race "); i >= 0 {
		testFlags = gcflags.FindString(script[i:])
	}
	ci, err := os.ReadFile(filepath.Join(repoRoot(t), ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(ci), "\n") {
		if strings.HasPrefix(l, "go build -race") && gcflags.FindString(l) != testFlags {
			t.Errorf(".ci/run compiles with %q, scripts/test with %q: the tests compile everything again", gcflags.FindString(l), testFlags)
		}
	}
	if !strings.Contains(script, "$(mktemp -d)") || !strings.Contains(script, "export "+parleybin.DirEnv+"=") {
		t.Errorf("scripts/test does not export %s, a fresh folder (mktemp -d) for the run's one build of the binary", parleybin.DirEnv)
	}
}

// TestCIRunsVet: .ci/run vets inside go test (-vet=all, every analyzer)
// rather than with a separate `go vet ./...`; dropping both would leave CI
// with go test's short default list only.
func TestCIRunsVet(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if strings.Contains(l, "go vet ./...") || (strings.Contains(l, "scripts/test") && strings.Contains(l, "-vet=all")) {
			return
		}
	}
	t.Error(".ci/run neither runs `go vet ./...` nor `scripts/test -vet=all`")
}

// TestNoPackageIsCompiledAgainForAnotherPackagesTests: when package P has
// tests inside it (package p) and its external tests (package p_test)
// import a package Q that imports P, go test compiles Q again against P's
// test build, and so everything between them: config's did that to twelve
// packages, every channel among them, each a few seconds of the cold run's
// CPU for nothing. Such tests belong in p_test, or in Q's package.
func TestNoPackageIsCompiledAgainForAnotherPackagesTests(t *testing.T) {
	cmd := exec.Command("go", "list", "-test", "-deps", "./...")
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -test -deps ./...: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		// "Q [P.test]": Q compiled for P's test binary.
		pkg, forTest, ok := strings.Cut(line, " [")
		if !ok {
			continue
		}
		of := strings.TrimSuffix(forTest, ".test]")
		if pkg != of && pkg != of+"_test" {
			t.Errorf("%s is compiled again for %s's tests: %s has tests in its own package whose external tests import %s", pkg, of, of, pkg)
		}
	}
}

// TestScriptsTestSaysWhatItIsDoing: go test prints nothing until a
// package's tests are done, so a cold run would look hung for minutes;
// scripts/test says that it is compiling, and that a first run takes a
// few minutes, before go test starts. A stand-in go on PATH records the
// order (and makes the check cost nothing).
func TestScriptsTestSaysWhatItIsDoing(t *testing.T) {
	bin, cache := t.TempDir(), t.TempDir()
	fakeGo := "#!/bin/sh\nif [ \"$1\" = env ]; then echo \"$FAKE_GOCACHE\"; exit 0; fi\necho \"go $1 ran\"\n"
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, want string
		warm       bool
	}{
		{"cold", "a first run compiles for a few minutes", false},
		{"warm", "compiling what changed", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.warm {
				if err := os.WriteFile(filepath.Join(cache, "entry"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("bash", "test", "./nothing/")
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "FAKE_GOCACHE="+cache,
				"PARLEY_TEST_BINARY=/nonexistent", "REDIS_URL=", "PARLEY_TEST_REQUIRE_REDIS=")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("scripts/test: %v\n%s", err, out)
			}
			said, ran := strings.Index(string(out), tt.want), strings.Index(string(out), "go test ran")
			if said < 0 || ran < 0 || said > ran {
				t.Fatalf("scripts/test did not say %q before go test ran:\n%s", tt.want, out)
			}
		})
	}
}
