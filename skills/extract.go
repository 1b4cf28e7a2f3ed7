package skills

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// versionFile records which builtin version a cache folder holds.
const versionFile = ".version"

// extractBuiltins copies each top-level skill folder of fsys into
// cacheRoot/NAME, rewriting a folder only when its .version differs from the
// embedded one, and returns the cache folders in name order. Per-skill
// failures become warnings; only an unusable cacheRoot is an error.
func extractBuiltins(fsys fs.FS, cacheRoot string) ([]string, []Warning, error) {
	if err := os.MkdirAll(cacheRoot, 0o755); err != nil {
		return nil, nil, fmt.Errorf("create builtin skills cache: %w", err)
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, nil, fmt.Errorf("read embedded builtin skills: %w", err)
	}
	var dirs []string
	var warns []Warning
	for _, e := range entries {
		if !e.IsDir() || skipFolder(e.Name()) {
			continue
		}
		dir, w := extractOne(fsys, e.Name(), cacheRoot)
		warns = append(warns, w...)
		if dir != "" {
			dirs = append(dirs, dir)
		}
	}
	return dirs, warns, nil
}

func extractOne(fsys fs.FS, folder, cacheRoot string) (string, []Warning) {
	data, err := fs.ReadFile(fsys, path.Join(folder, skillFileName))
	if err != nil {
		return "", nil // a folder without SKILL.md is not a skill
	}
	virtual := filepath.Join(cacheRoot, folder, skillFileName)
	s, warns, err := ParseSkillFile(virtual, data)
	if err != nil {
		return "", warns
	}
	version, err := builtinVersion(fsys, folder, s.Version)
	if err != nil {
		return "", append(warns, Warning{File: virtual, Msg: fmt.Sprintf("builtin skill not extracted: %v", err)})
	}
	dest := filepath.Join(cacheRoot, s.Name)
	if cur, err := os.ReadFile(filepath.Join(dest, versionFile)); err == nil && string(cur) == version {
		return dest, nil // up to date: skip the IO
	}
	if err := writeBuiltin(fsys, folder, cacheRoot, dest, version); err != nil {
		return "", append(warns, Warning{File: dest, Msg: fmt.Sprintf("builtin skill not extracted: %v", err)})
	}
	return dest, nil
}

// builtinVersion combines the frontmatter version with a hash of every
// embedded file, so an edit without a version bump still refreshes the cache.
func builtinVersion(fsys fs.FS, folder, declared string) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, folder, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", strings.TrimPrefix(p, folder+"/"), len(data))
		h.Write(data)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash embedded files: %w", err)
	}
	return declared + "+sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// writeBuiltin builds the folder beside dest and swaps it in, so a reader or
// a crash never sees a half-written skill.
func writeBuiltin(fsys fs.FS, folder, cacheRoot, dest, version string) error {
	tmp, err := os.MkdirTemp(cacheRoot, "."+filepath.Base(dest)+".tmp-")
	if err != nil {
		return fmt.Errorf("create temporary folder: %w", err)
	}
	defer os.RemoveAll(tmp) // no-op once renamed
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("chmod temporary folder: %w", err)
	}
	err = fs.WalkDir(fsys, folder, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, folder), "/")
		target := filepath.Join(tmp, filepath.FromSlash(rel))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(rel, "scripts/") {
			mode = 0o755 // embed drops modes; scripts are meant to run
		}
		return os.WriteFile(target, data, mode)
	})
	if err != nil {
		return fmt.Errorf("copy embedded files: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, versionFile), []byte(version), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", versionFile, err)
	}
	var old string
	if _, err := os.Lstat(dest); err == nil {
		old = dest + ".old-" + rand.Text()
		if err := os.Rename(dest, old); err != nil {
			return fmt.Errorf("move old cache aside: %w", err)
		}
	}
	if err := os.Rename(tmp, dest); err != nil {
		// Another process may have won the race with the same version.
		if cur, rerr := os.ReadFile(filepath.Join(dest, versionFile)); rerr == nil && bytes.Equal(cur, []byte(version)) {
			return nil
		}
		return fmt.Errorf("install cache folder: %w", err)
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("remove old cache folder: %w", err)
		}
	}
	return nil
}
