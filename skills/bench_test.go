package skills

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/skills/builtin"
)

// benchSkillCount is the catalog size the start-up budget is set for
// (5,000 skills start in at most 300 ms and +10 MiB).
const benchSkillCount = 5000

// writeBenchSkills writes n realistic skill folders under home's user
// layer: frontmatter with name, description, version and tags, a body of
// a few KiB and a references/ file.
func writeBenchSkills(tb testing.TB, home string, n int) {
	tb.Helper()
	root := UserSkillsDir(home)
	para := "Check the service's health endpoint, then the dashboards, then the logs of the last hour. " +
		"Write down what you saw before changing anything, and say which step failed.\n"
	body := "# Runbook\n\n" + strings.Repeat(para, 12) + "\n```sh\nkubectl get pods -n prod\n```\n\n" + strings.Repeat(para, 12)
	for i := range n {
		name := fmt.Sprintf("bench-skill-%04d", i)
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Join(dir, "references"), 0o755); err != nil {
			tb.Fatal(err)
		}
		md := fmt.Sprintf("---\nname: %s\ndescription: Use when the on-call engineer asks about service %d, its health checks, dashboards and the rollback steps for it.\nversion: \"1.%d\"\ntags: [ops, service-%d]\n---\n\n%s", name, i, i%10, i, body)
		if err := os.WriteFile(filepath.Join(dir, skillFileName), []byte(md), 0o644); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "references", "checklist.md"), []byte("1. Tests green\n2. Rollback ready\n"), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkLoad5000Skills loads a catalog of 5,000 user skills plus the
// builtins the way `parley serve` does at start (skills/live.Open:
// NewRegistry over the three layers) and reports, besides time and
// allocations, the heap the loaded registry keeps (MiB-retained).
//
//	go test ./skills -run '^$' -bench Load5000Skills -benchmem -count 3
func BenchmarkLoad5000Skills(b *testing.B) {
	home := b.TempDir()
	writeBenchSkills(b, home, benchSkillCount)
	// Warm the builtin cache and the page cache: the figure is start-up
	// from a warm disk, as on every restart but the first.
	warm, err := NewRegistry(Layers{Builtin: builtin.FS, Home: home})
	if err != nil {
		b.Fatal(err)
	}
	if ws := warm.Catalog().Warnings(); len(ws) != 0 {
		b.Fatalf("the benchmark's skills are not clean: %v", ws[0])
	}
	var retained uint64
	var cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		before := heapInUse()
		cpu0 := cpuTime()
		b.StartTimer()
		reg, err := NewRegistry(Layers{Builtin: builtin.FS, Home: home})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += cpuTime() - cpu0
		if n := reg.Catalog().Len(); n != benchSkillCount+2 {
			b.Fatalf("loaded %d skills, want %d", n, benchSkillCount+2)
		}
		if after := heapInUse(); after > before {
			retained = after - before
		}
		runtime.KeepAlive(reg)
		b.StartTimer()
	}
	b.ReportMetric(float64(retained)/(1<<20), "MiB-retained")
	// CPU time (user+system) is steadier than wall time on a busy machine.
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
