//go:build !linux

package bench

import "os/exec"

// child is a process the bench starts; only Linux can tie its life to the
// bench's (the bench's figures need Linux's /proc anyway).
func child(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }
