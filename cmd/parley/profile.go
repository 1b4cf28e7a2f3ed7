//go:build parleyprofile

// A build of parley for measuring, never shipped: `go build -tags
// parleyprofile` adds CPU and allocation profiles that scripts/bench
// (-profile DIR) takes of `parley serve` under load. SIGUSR1 starts a CPU
// profile into $PARLEY_PROFILE_DIR/cpu.pprof; SIGUSR2 stops it and writes
// the allocations since start-up to allocs.pprof. Each file is written
// under a temporary name and renamed when complete.

package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
)

func init() {
	dir := os.Getenv("PARLEY_PROFILE_DIR")
	if dir == "" {
		return
	}
	runtime.MemProfileRate = 64 << 10
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		var cpu *os.File
		for s := range sig {
			switch {
			case s == syscall.SIGUSR1 && cpu == nil:
				f, err := os.Create(filepath.Join(dir, "cpu.pprof.tmp"))
				if err == nil {
					err = pprof.StartCPUProfile(f)
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "profile:", err)
					continue
				}
				cpu = f
			case s == syscall.SIGUSR2 && cpu != nil:
				pprof.StopCPUProfile()
				cpu.Close()
				cpu = nil
				os.Rename(filepath.Join(dir, "cpu.pprof.tmp"), filepath.Join(dir, "cpu.pprof"))
				if f, err := os.Create(filepath.Join(dir, "allocs.pprof.tmp")); err == nil {
					pprof.Lookup("allocs").WriteTo(f, 0)
					f.Close()
					os.Rename(filepath.Join(dir, "allocs.pprof.tmp"), filepath.Join(dir, "allocs.pprof"))
				}
			}
		}
	}()
}
