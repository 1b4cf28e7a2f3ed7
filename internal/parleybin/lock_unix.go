//go:build unix

package parleybin

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lock takes an exclusive lock on the file at path (made if missing),
// waiting for another process, or another open file in this one, that
// holds it. The lock goes with the open file, so a process that dies
// holding it releases it.
func lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("parleybin: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("parleybin: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}
