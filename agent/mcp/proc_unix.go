//go:build unix

package mcp

import (
	"os"
	"os/exec"
	"syscall"
)

var (
	terminate = syscall.SIGTERM
	kill      = syscall.SIGKILL
)

// setProcessGroup starts cmd in a process group of its own, so that
// signalGroup reaches everything it starts.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to cmd's process group. Errors mean the group is
// gone already.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, sig)
	}
}

// exitSignal reports the signal that ended a process, if one did.
func exitSignal(ps *os.ProcessState) (syscall.Signal, bool) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return ws.Signal(), true
}
