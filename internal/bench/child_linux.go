package bench

import (
	"os/exec"
	"syscall"
)

// child is a process the bench starts (redis-server, parley serve) that
// the kernel kills when the bench dies, however it dies. An orphan would
// keep its port and the CPU busy, and it holds every descriptor the bench
// inherited: under `flock /tmp/bench.lock scripts/bench` that is the lock,
// so every later bench would wait for it forever.
func child(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}
