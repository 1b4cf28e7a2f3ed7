//go:build !unix

package parleybin

import "errors"

// lock is not available here: without it, Path builds per test process.
func lock(path string) (unlock func(), err error) {
	return nil, errors.New("parleybin: a build shared between test processes needs flock (unix); unset PARLEY_TEST_BUILD_DIR")
}
