package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/internal/atomicfile"
)

// Files a turn sends (send_file) are written under Options.FilesDir
// ($PARLEY_HOME/files for `parley chat`) and their path is printed: the
// console's native way of handing someone a file.

var _ channels.Uploader = (*Adapter)(nil)

// MaxUploadBytes is the largest file the console writes.
const MaxUploadBytes = 100 << 20

// FileLimits implements channels.Uploader: none without a FilesDir.
func (c *Adapter) FileLimits(channels.Message) channels.FileLimits {
	if c.opts.FilesDir == "" {
		return channels.FileLimits{}
	}
	return channels.FileLimits{MaxImage: MaxUploadBytes, MaxFile: MaxUploadBytes}
}

// Upload implements channels.Uploader: f is written under FilesDir, never
// outside it (the directory is opened as an os.Root), under its name
// with a part of key's hash, so that two files never share a name and a
// second try of one key finds the file the first wrote instead of
// writing it again. The path is printed, with the caption.
//
// The bytes go to a hidden temporary file first, synced, then renamed to
// the name (atomicfile): a file under its name is always whole, so someone
// opening it as soon as it appears reads all of it, and a try cut short (a
// crash, a full disk) leaves no file a second try would take for done.
func (c *Adapter) Upload(_ context.Context, _ channels.Message, f channels.File, key string, _ bool) (string, error) {
	dir := c.opts.FilesDir
	if dir == "" {
		return "", &channels.PostError{Err: errors.New("console: no directory for files")}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", &channels.PostError{Err: fmt.Errorf("console: files directory: %w", err)}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", &channels.PostError{Err: fmt.Errorf("console: files directory: %w", err)}
	}
	defer root.Close()
	name := uniqueName(f.Name, key)
	path := filepath.Join(dir, name)
	if _, err := root.Stat(name); err == nil {
		// An earlier try of this key wrote it: found, not written twice.
		return path, nil
	}
	if err := atomicfile.Write(root, name, f.Data, 0o600); err != nil {
		return "", &channels.PostError{Retry: true, Err: fmt.Errorf("console: write file: %w", err)}
	}
	c.printFile(path, f)
	return path, nil
}

// uniqueName is name (already a safe base name) with 8 hex digits of
// key's hash before its extension; a name that is not a plain base name
// becomes "file".
func uniqueName(name, key string) string {
	if name == "" || filepath.Base(name) != name || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		name = "file"
	}
	sum := sha256.Sum256([]byte(key))
	ext := filepath.Ext(name)
	return strings.TrimSuffix(name, ext) + "-" + hex.EncodeToString(sum[:4]) + ext
}

// printFile tells the person at the terminal where the file is.
func (c *Adapter) printFile(path string, f channels.File) {
	w := c.opts.FileOut
	if w == nil {
		w = c.opts.Status
	}
	if w == nil {
		return
	}
	line := "[file: " + path + "]"
	if f.Caption != "" {
		line = f.Caption + "\n" + line
	}
	_, _ = io.WriteString(w, line+"\n")
}
