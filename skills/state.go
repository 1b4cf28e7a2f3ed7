package skills

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/parleyhq/parley/internal/atomicfile"
)

// State persists the only skill settings Parley keeps: which skills are
// disabled and which workspace SKILL.md files an admin trusted. Everything
// is enabled by default so new skills are never silently off.
// Implementations must be safe for concurrent use.
type State interface {
	// Disabled returns the names of disabled skills (true = disabled).
	Disabled(ctx context.Context) (map[string]bool, error)
	// SetDisabled disables (off=true) or re-enables a skill by name.
	SetDisabled(ctx context.Context, name string, off bool) error
	// Trusted reports whether the SKILL.md at path with content hash sha
	// (Skill.Path, Skill.SHA256) was trusted. A changed file is untrusted.
	Trusted(ctx context.Context, path, sha string) (bool, error)
	// Trust records path+sha as trusted, replacing an older hash for path.
	Trust(ctx context.Context, path, sha string) error
}

// StateFileName is the FileState file under $PARLEY_HOME.
const StateFileName = "skills.json"

// stateFile is the JSON layout of skills.json.
type stateFile struct {
	Disabled []string       `json:"disabled"`
	Trusted  []trustedEntry `json:"trusted"`
}

type trustedEntry struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// FileState is a State kept in $PARLEY_HOME/skills.json for single-instance
// deployments. Each call re-reads the file, so edits by hand or by another
// process are seen; writes are atomic (temporary file + rename, 0600).
// Concurrent writers in different processes may lose an update.
type FileState struct {
	path string
	mu   sync.Mutex
}

var _ State = (*FileState)(nil)

// OpenFileState returns the state stored under home. A missing or corrupt
// file means nothing is disabled or trusted; a corrupt one is reported as a
// warning, never as an error, so start-up is never blocked.
func OpenFileState(home string) (*FileState, []Warning) {
	st := &FileState{path: filepath.Join(home, StateFileName)}
	_, warn := st.read()
	if warn != nil {
		return st, []Warning{*warn}
	}
	return st, nil
}

// Path returns the state file's path.
func (f *FileState) Path() string { return f.path }

// read loads the file; problems degrade to empty state plus a warning.
func (f *FileState) read() (stateFile, *Warning) {
	data, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return stateFile{}, nil
	}
	if err != nil {
		return stateFile{}, &Warning{File: f.path, Msg: fmt.Sprintf("cannot read skill state, treating as empty: %v", cleanPathErr(err))}
	}
	var st stateFile
	if err := json.Unmarshal(data, &st); err != nil {
		return stateFile{}, &Warning{File: f.path, Msg: fmt.Sprintf("corrupt skill state, treating as empty: %v", err)}
	}
	return st, nil
}

// Disabled implements State.
func (f *FileState) Disabled(ctx context.Context) (map[string]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st, _ := f.read()
	out := make(map[string]bool, len(st.Disabled))
	for _, n := range st.Disabled {
		out[n] = true
	}
	return out, nil
}

// SetDisabled implements State.
func (f *FileState) SetDisabled(ctx context.Context, name string, off bool) error {
	if !ValidName(name) {
		return fmt.Errorf("skill name %q: %w", name, ErrInvalidName)
	}
	return f.update(ctx, func(st *stateFile) {
		st.Disabled = slices.DeleteFunc(st.Disabled, func(n string) bool { return n == name })
		if off {
			st.Disabled = append(st.Disabled, name)
		}
	})
}

// Trusted implements State.
func (f *FileState) Trusted(ctx context.Context, path, sha string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st, _ := f.read()
	path = filepath.Clean(path)
	for _, t := range st.Trusted {
		if t.Path == path {
			return sha != "" && strings.EqualFold(t.SHA256, sha), nil
		}
	}
	return false, nil
}

// Trust implements State.
func (f *FileState) Trust(ctx context.Context, path, sha string) error {
	if path == "" || sha == "" {
		return fmt.Errorf("trust needs a SKILL.md path and its sha256")
	}
	path = filepath.Clean(path)
	return f.update(ctx, func(st *stateFile) {
		st.Trusted = slices.DeleteFunc(st.Trusted, func(t trustedEntry) bool { return t.Path == path })
		st.Trusted = append(st.Trusted, trustedEntry{Path: path, SHA256: strings.ToLower(sha)})
	})
}

// update applies change under the lock and writes the file atomically.
func (f *FileState) update(ctx context.Context, change func(*stateFile)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st, _ := f.read() // a corrupt file is replaced: it held nothing usable
	change(&st)
	slices.Sort(st.Disabled)
	st.Disabled = slices.Compact(st.Disabled)
	slices.SortFunc(st.Trusted, func(a, b trustedEntry) int { return strings.Compare(a.Path, b.Path) })
	if st.Disabled == nil {
		st.Disabled = []string{}
	}
	if st.Trusted == nil {
		st.Trusted = []trustedEntry{}
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode skill state: %w", err)
	}
	return writeFileAtomic(f.path, append(data, '\n'), 0o600)
}

// writeFileAtomic writes data over path (atomicfile), creating its folder.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create state folder: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("write skill state: %w", err)
	}
	defer root.Close()
	if err := atomicfile.Write(root, filepath.Base(path), data, perm); err != nil {
		return fmt.Errorf("write skill state: %w", err)
	}
	return nil
}
