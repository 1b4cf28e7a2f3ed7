// Package atomicfile writes a file so that whoever opens it by its name
// finds either what was there before or all of the new bytes: never an
// empty or half-written file, and never a partial one left behind by a
// write cut short (a crash, a full disk) for a later try to take as done.
package atomicfile

import (
	"crypto/rand"
	"os"
	"path"
)

// Write writes data to name (a slash-separated path inside root) through
// a hidden temporary file beside it, ".BASE.tmp-…", synced and then
// renamed over name. On failure nothing is left under either name; a
// process killed mid-write leaves only the hidden temporary file.
func Write(root *os.Root, name string, data []byte, perm os.FileMode) error {
	dir, base := path.Split(name)
	tmp := dir + "." + base + ".tmp-" + rand.Text()
	f, err := root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}
