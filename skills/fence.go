package skills

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// cleanRel validates a model-supplied path relative to a fenced folder and
// returns its elements ("" and "." elements dropped; none for the folder
// itself). It refuses anything that could name a file outside the folder
// — absolute paths, "..", backslashes, NUL and percent-encoded dots,
// slashes, backslashes, NUL or percents (double encoding) — instead of
// trying to make sense of it.
func cleanRel(rel string) ([]string, error) {
	switch {
	case strings.ContainsAny(rel, "\x00\\"):
		return nil, fmt.Errorf("path %q: backslashes and NUL are not allowed: %w", rel, ErrPathEscape)
	case hasEncodedEscape(rel):
		return nil, fmt.Errorf("path %q: percent-encoded dots or separators are not allowed: %w", rel, ErrPathEscape)
	case strings.HasPrefix(rel, "/"), strings.HasPrefix(rel, "~"), isDriveLetter(rel):
		return nil, fmt.Errorf("path %q: must be relative to the skill folder: %w", rel, ErrPathEscape)
	}
	var parts []string
	for _, p := range strings.Split(rel, "/") {
		switch p {
		case "", ".":
		case "..":
			return nil, fmt.Errorf("path %q: \"..\" is not allowed: %w", rel, ErrPathEscape)
		default:
			parts = append(parts, p)
		}
	}
	return parts, nil
}

func isDriveLetter(p string) bool {
	return len(p) >= 2 && p[1] == ':' && (p[0]|0x20 >= 'a' && p[0]|0x20 <= 'z')
}

// hasEncodedEscape reports a %XX escape decoding to '.', '/', '\\', NUL or
// '%' — the building blocks of traversal if anything downstream decodes.
func hasEncodedEscape(p string) bool {
	for i := 0; i+2 < len(p); i++ {
		if p[i] != '%' {
			continue
		}
		hi, ok1 := unhex(p[i+1])
		lo, ok2 := unhex(p[i+2])
		if !ok1 || !ok2 {
			continue
		}
		switch hi<<4 | lo {
		case '.', '/', '\\', 0, '%':
			return true
		}
	}
	return false
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// lstatChain checks every element of parts under root with Lstat, refusing a
// symlink anywhere on the way, and returns the final element's info.
func lstatChain(root *os.Root, parts []string, display string) (fs.FileInfo, error) {
	var fi fs.FileInfo
	for i := range parts {
		p := path.Join(parts[:i+1]...)
		var err error
		fi, err = root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", display, ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", display, cleanPathErr(err))
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s: symlinks are not followed: %w", display, ErrPathEscape)
		}
		if i < len(parts)-1 && !fi.IsDir() {
			return nil, fmt.Errorf("%s: %s is not a folder: %w", display, p, ErrNotFound)
		}
	}
	return fi, nil
}

// skillFolder resolves the skill folder dir for reading and checks that it
// is still where loading found it: a folder inside its layer root, reached
// through no symlink that leaves the root (a Kubernetes ConfigMap volume
// links every entry into its ..data/ folder, which stays inside), so a
// skill folder swapped for a symlink to elsewhere after loading is refused.
// root itself may be a symlink (a user may link ~/.parley/skills to a
// dotfiles repo). It returns the resolved folder, which the caller opens,
// so a symlink changed after this check cannot redirect the read.
func skillFolder(root, dir string) (string, error) {
	rel, err := filepath.Rel(root, dir)
	if root == "" || err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		// Unknown layer root: at least the folder itself must be real.
		fi, err := os.Lstat(dir)
		if err != nil {
			return "", fmt.Errorf("skill folder: %w", ErrNotFound)
		}
		if fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir() {
			return "", fmt.Errorf("skill folder is a symlink or not a folder: %w", ErrPathEscape)
		}
		return dir, nil
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("skill folder: %w", ErrNotFound)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("skill folder: %w", ErrNotFound)
	}
	if real != realRoot && !within(realRoot, real) {
		return "", fmt.Errorf("skill folder is reached through a symlink leading outside its layer: %w", ErrPathEscape)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("skill folder: %w", ErrNotFound)
	}
	return real, nil
}

// cleanPathErr drops the host path from an *fs.PathError so messages shown
// to the model do not leak folder layouts.
func cleanPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
