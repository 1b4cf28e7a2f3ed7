//go:build !unix

package mcp

import (
	"os"
	"os/exec"
)

// Without process groups only the server process itself can be stopped.
var (
	terminate = os.Kill
	kill      = os.Kill
)

func setProcessGroup(*exec.Cmd) {}

func signalGroup(cmd *exec.Cmd, sig os.Signal) {
	if cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}

func exitSignal(*os.ProcessState) (os.Signal, bool) { return nil, false }
