package parleybin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// shared returns the binary in dir, building it with build if no process
// has yet. The test processes of one run (one per package, started by `go
// test` as their packages are compiled) share dir; the lock makes exactly
// one of them build while the others wait, then read the finished file.
// The file is built under a temporary name and renamed, so it is whole
// once it has its name even if a builder was killed mid-way; a build that
// failed leaves nothing, and the next process to ask tries again. The race
// and plain builds have names of their own.
func shared(dir string, race bool, build func(out string) error) (string, error) {
	name := "parley"
	if race {
		name = "parley-race"
	}
	path := filepath.Join(dir, name)
	unlock, err := lock(filepath.Join(dir, name+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	tmp := path + ".building"
	if err := build(tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("parleybin: %w", err)
	}
	return path, nil
}
