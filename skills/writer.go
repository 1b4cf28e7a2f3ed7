package skills

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/parleyhq/parley/internal/atomicfile"
)

// Write-back limits for save_skill_reference.
const (
	MaxReferenceRunes     = 8000     // characters per call
	MaxReferenceFileBytes = 64 << 10 // resulting file size
	// MaxSkillReferenceFiles and MaxSkillReferenceBytes cap one skill's
	// supplement folder as a whole, so that a model told to take notes
	// cannot fill the disk one 64 KiB file at a time.
	MaxSkillReferenceFiles = 32
	MaxSkillReferenceBytes = 512 << 10
	maxPathElement         = 255
)

// Writer saves model-written notes into the user supplement folder
// $home/skills/NAME/references/. Its mutex serialises saves in this process
// so the size checks and the write are one step; share one Writer.
type Writer struct {
	home string
	mu   sync.Mutex
	// maxFiles and maxBytes cap one skill's supplement folder.
	maxFiles int
	maxBytes int64
}

// NewWriter returns a Writer for $PARLEY_HOME home.
func NewWriter(home string) *Writer {
	return &Writer{home: home, maxFiles: MaxSkillReferenceFiles, maxBytes: MaxSkillReferenceBytes}
}

// SaveReference is a one-off Writer.Save. Calls through different Writers
// are not serialised with each other; the agent should share one Writer.
func SaveReference(home, name, file, content string, overwrite bool) (written int, path string, err error) {
	return NewWriter(home).Save(name, file, content, overwrite)
}

// Save writes content to file (e.g. "references/site-patterns/x.md") in the
// supplement folder of skill name and returns the bytes written and the
// absolute path (for the audit log). Only .md files under references/ are
// writable, never SKILL.md; paths follow the ReadFile fence and a symlink
// anywhere from $home/skills down refuses the write. content is at most
// MaxReferenceRunes characters and gets a trailing newline if it lacks one;
// the resulting file is at most MaxReferenceFileBytes, and the skill's
// supplement folder at most MaxSkillReferenceFiles files and
// MaxSkillReferenceBytes bytes. By default content is
// appended with O_APPEND; overwrite replaces the file atomically. The
// builtin cache and the skill's own SKILL.md are never touched.
func (w *Writer) Save(name, file, content string, overwrite bool) (written int, path string, err error) {
	parts, err := checkReferencePath(name, file)
	if err != nil {
		return 0, "", err
	}
	if err := checkContent(content); err != nil {
		return 0, "", err
	}
	if !strings.HasSuffix(content, "\n") {
		content += "\n" // keeps concurrent appends on separate lines
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	root, err := openUserSkills(w.home)
	if err != nil {
		return 0, "", err
	}
	defer root.Close()
	rel := append([]string{name}, parts...)
	if err := mkdirChain(root, rel[:len(rel)-1], file); err != nil {
		return 0, "", err
	}
	target := strings.Join(rel, "/")
	var size int64
	exists := true
	switch fi, err := root.Lstat(target); {
	case errors.Is(err, fs.ErrNotExist):
		exists = false
	case err != nil:
		return 0, "", fmt.Errorf("%s: %w", file, cleanPathErr(err))
	case fi.Mode()&fs.ModeSymlink != 0:
		return 0, "", fmt.Errorf("%s is a symlink: %w", file, ErrPathEscape)
	case !fi.Mode().IsRegular():
		return 0, "", fmt.Errorf("%s is not a regular file: %w", file, ErrNotAllowed)
	default:
		size = fi.Size()
	}
	kept := size // of the file's bytes, what stays after the write
	if overwrite {
		kept = 0
	}
	if kept+int64(len(content)) > MaxReferenceFileBytes {
		return 0, "", fmt.Errorf("%s would grow to %d bytes, over the %d-byte limit (save to a new file or overwrite): %w",
			file, kept+int64(len(content)), MaxReferenceFileBytes, ErrTooLarge)
	}
	if err := w.checkSkillTotal(root, name, !exists, kept+int64(len(content))-size); err != nil {
		return 0, "", err
	}
	abs := filepath.Join(UserSkillsDir(w.home), filepath.FromSlash(target))
	if overwrite {
		n, err := replaceFile(root, target, content)
		if err != nil {
			return 0, "", fmt.Errorf("%s: %w", file, err)
		}
		return n, abs, nil
	}
	f, err := root.OpenFile(target, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, "", fmt.Errorf("open %s: %w", file, cleanPathErr(err))
	}
	// One write call per append: with O_APPEND the kernel places it at the
	// end atomically, so other processes appending do not interleave.
	n, err := f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, abs, fmt.Errorf("append %s: %w", file, cleanPathErr(err))
	}
	return n, abs, nil
}

// checkSkillTotal refuses a write that would take skill name's supplement
// folder past the Writer's caps: newFile says it adds a file, growth is
// how many bytes it adds (negative when an overwrite shrinks a file).
func (w *Writer) checkSkillTotal(root *os.Root, name string, newFile bool, growth int64) error {
	files, total, err := referenceUsage(root, name)
	if err != nil {
		return err
	}
	if newFile && files+1 > w.maxFiles {
		return fmt.Errorf("skill %s already has %d reference files, the limit; add to one of them or overwrite it instead: %w", name, files, ErrTooLarge)
	}
	if total+growth > w.maxBytes {
		return fmt.Errorf("skill %s's reference files would total %d bytes, over the %d-byte limit per skill; overwrite an old note with a shorter one instead: %w",
			name, total+growth, w.maxBytes, ErrTooLarge)
	}
	return nil
}

// referenceUsage counts the regular files under skill name's references/
// in the supplement root and their bytes. Symlinks are not followed (a
// write under a symlink is refused anyway) and count as nothing.
func referenceUsage(root *os.Root, name string) (files int, total int64, err error) {
	dir := name + "/" + referencesDir
	err = fs.WalkDir(root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return fs.SkipAll // nothing written yet
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files++
		total += fi.Size()
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("count the skill's reference files: %w", cleanPathErr(err))
	}
	return files, total, nil
}

// checkReferencePath validates name and file and returns file's elements,
// the first being "references".
func checkReferencePath(name, file string) ([]string, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("skill name %q: %w", name, ErrInvalidName)
	}
	parts, err := cleanRel(file)
	if err != nil {
		return nil, err
	}
	if len(parts) < 2 || parts[0] != referencesDir {
		return nil, fmt.Errorf("file %q: only files under references/ can be written (e.g. references/notes.md): %w", file, ErrPathEscape)
	}
	for _, p := range parts[1:] {
		switch {
		case strings.HasPrefix(p, "."):
			return nil, fmt.Errorf("file %q: hidden names are not allowed: %w", file, ErrNotAllowed)
		case strings.EqualFold(p, skillFileName):
			return nil, fmt.Errorf("file %q: SKILL.md can never be written: %w", file, ErrNotAllowed)
		case len(p) > maxPathElement:
			return nil, fmt.Errorf("file %q: name too long: %w", file, ErrNotAllowed)
		}
	}
	if !strings.EqualFold(path.Ext(parts[len(parts)-1]), ".md") {
		return nil, fmt.Errorf("file %q: only .md files can be written: %w", file, ErrNotAllowed)
	}
	return parts, nil
}

func checkContent(content string) error {
	switch {
	case strings.TrimSpace(content) == "":
		return fmt.Errorf("content is empty: %w", ErrNotAllowed)
	case !utf8.ValidString(content) || strings.ContainsRune(content, 0):
		return fmt.Errorf("content is not UTF-8 text: %w", ErrNotAllowed)
	}
	if n := utf8.RuneCountInString(content); n > MaxReferenceRunes {
		return fmt.Errorf("content is %d characters, over the %d-character limit per call: %w", n, MaxReferenceRunes, ErrTooLarge)
	}
	return nil
}

// openUserSkills opens $home/skills as an os.Root, creating it if missing
// and refusing it if it is a symlink.
func openUserSkills(home string) (*os.Root, error) {
	if home == "" {
		return nil, fmt.Errorf("no home folder configured: %w", ErrNotAllowed)
	}
	dir := UserSkillsDir(home)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create user skills folder: %w", cleanPathErr(err))
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("user skills folder: %w", cleanPathErr(err))
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("user skills folder is a symlink; refusing to write: %w", ErrPathEscape)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open user skills folder: %w", cleanPathErr(err))
	}
	return root, nil
}

// mkdirChain makes each folder of dirs under root (0755), refusing symlinks
// and non-folders on the way.
func mkdirChain(root *os.Root, dirs []string, file string) error {
	for i := range dirs {
		p := strings.Join(dirs[:i+1], "/")
		fi, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			if err := root.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s: create folder: %w", file, cleanPathErr(err))
			}
			if fi, err = root.Lstat(p); err != nil {
				return fmt.Errorf("%s: %w", file, cleanPathErr(err))
			}
		} else if err != nil {
			return fmt.Errorf("%s: %w", file, cleanPathErr(err))
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s: folder %s is a symlink: %w", file, p, ErrPathEscape)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s: %s is not a folder: %w", file, p, ErrNotAllowed)
		}
	}
	return nil
}

// replaceFile writes content over target, so readers see the old or the
// new file, never a mix.
func replaceFile(root *os.Root, target, content string) (int, error) {
	if err := atomicfile.Write(root, target, []byte(content), 0o644); err != nil {
		return 0, fmt.Errorf("replace: %w", cleanPathErr(err))
	}
	return len(content), nil
}
