package skills

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxReadFileBytes caps a file ReadFile will page through; skill resources
// meant for a model are far smaller.
const MaxReadFileBytes = 1 << 20

// referencesDir is the only folder merged with the user supplement and the
// only folder save_skill_reference writes to.
const referencesDir = "references"

// supplementMark tags supplement entries in a listing.
const supplementMark = " (supplement)"

// SupplementDir is the user's notes folder for skill name; it is merged into
// reads under references/ and is where Writer.Save writes.
func SupplementDir(home, name string) string {
	return filepath.Join(UserSkillsDir(home), name, referencesDir)
}

// ReadFile reads a file or lists a folder of skill s for
// load_skill(name, file, offset). rel is relative to the skill folder ("" or
// "." lists it; "SKILL.md" pages the body like SkillFileChunk). Absolute
// paths, "..", encoded escapes, backslashes and symlinks anywhere on the way
// are refused with ErrPathEscape. Under references/ the user supplement
// ($home/skills/NAME/references/) is merged: a listing shows the skill's
// entries then the supplement's (marked "(supplement)"); a file shows the
// skill's version, a separator line, then the supplement; a file only the
// supplement has is returned alone. The result is paged by byte offset in
// BodyChunkBytes chunks cut on line boundaries, with a hint to continue.
// home may be "" to skip the supplement.
func ReadFile(s *Skill, home, rel string, offset int) (string, error) {
	parts, err := cleanRel(rel)
	if err != nil {
		return "", fmt.Errorf("skill %s: %w", s.Name, err)
	}
	display := path.Join(parts...)
	if display == "" {
		display = "."
	}
	if err := refuseHidden(parts, rel); err != nil {
		return "", fmt.Errorf("skill %s: %w", s.Name, err)
	}
	if display == skillFileName {
		return SkillFileChunk(s, offset)
	}
	dir, err := skillFolder(s.Root, s.Dir)
	if err != nil {
		return "", fmt.Errorf("skill %s: %w", s.Name, err)
	}
	own, err := inspect(dir, parts, display)
	if err != nil {
		return "", fmt.Errorf("skill %s: %w", s.Name, err)
	}
	var sup entry
	if home != "" && len(parts) > 0 && parts[0] == referencesDir {
		supDir := SupplementDir(home, s.Name)
		if filepath.Clean(supDir) != filepath.Join(filepath.Clean(s.Dir), referencesDir) {
			sup, err = inspectSupplement(home, s.Name, parts[1:], display)
			if err != nil {
				return "", fmt.Errorf("skill %s supplement: %w", s.Name, err)
			}
		}
	}
	text, err := merge(own, sup, s.Name, display)
	if err != nil {
		return "", fmt.Errorf("skill %s: %w", s.Name, err)
	}
	out, err := pageWithHint(text, offset, s.Name, display)
	if err != nil {
		return "", fmt.Errorf("skill %s: file %q: %w", s.Name, display, err)
	}
	return out, nil
}

// refuseHidden refuses a path with a dot-file or dot-folder anywhere in it
// (.git/config, .env, .version): listings already hide them, and they hold
// bookkeeping or secrets, never instructions. The refusal comes before any
// lookup, so it says nothing about whether such a file exists.
func refuseHidden(parts []string, rel string) error {
	for _, p := range parts {
		if strings.HasPrefix(p, ".") {
			return fmt.Errorf("path %q: hidden files and folders cannot be read: %w", rel, ErrNotAllowed)
		}
	}
	return nil
}

type entryKind int

const (
	missing entryKind = iota
	isFile
	isDir
)

// entry is what one side (skill or supplement) holds at a path.
type entry struct {
	kind    entryKind
	text    string   // isFile
	listing []string // isDir: names, folders with a trailing "/"
}

// inspect reads parts under base through an os.Root (which cannot escape
// base even if the tree changes under us) after refusing symlinks.
func inspect(base string, parts []string, display string) (entry, error) {
	root, err := os.OpenRoot(base)
	if errors.Is(err, fs.ErrNotExist) {
		return entry{}, nil
	}
	if err != nil {
		return entry{}, fmt.Errorf("open folder: %w", cleanPathErr(err))
	}
	defer root.Close()
	target := "."
	if len(parts) > 0 {
		fi, err := lstatChain(root, parts, display)
		if errors.Is(err, ErrNotFound) {
			return entry{}, nil
		}
		if err != nil {
			return entry{}, err
		}
		target = path.Join(parts...)
		if !fi.IsDir() {
			if !fi.Mode().IsRegular() {
				return entry{}, fmt.Errorf("%s is not a regular file: %w", display, ErrNotAllowed)
			}
			if fi.Size() > MaxReadFileBytes {
				return entry{}, fmt.Errorf("%s is %d bytes, over the %d-byte read limit: %w", display, fi.Size(), MaxReadFileBytes, ErrTooLarge)
			}
			data, err := root.ReadFile(target)
			if err != nil {
				return entry{}, fmt.Errorf("read %s: %w", display, cleanPathErr(err))
			}
			if !utf8.Valid(data) {
				return entry{}, fmt.Errorf("%s is not a UTF-8 text file: %w", display, ErrNotAllowed)
			}
			return entry{kind: isFile, text: string(data)}, nil
		}
	}
	f, err := root.Open(target)
	if err != nil {
		return entry{}, fmt.Errorf("open %s: %w", display, cleanPathErr(err))
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return entry{}, fmt.Errorf("list %s: %w", display, cleanPathErr(err))
	}
	var names []string
	for _, d := range des {
		switch {
		case strings.HasPrefix(d.Name(), "."), d.Type()&fs.ModeSymlink != 0:
			// Hidden bookkeeping (.version) and unreadable symlinks.
		case d.IsDir():
			names = append(names, d.Name()+"/")
		default:
			names = append(names, d.Name())
		}
	}
	slices.Sort(names)
	return entry{kind: isDir, listing: names}, nil
}

// inspectSupplement looks up sub under $home/skills/NAME/references,
// refusing a symlink anywhere from $home/skills down.
func inspectSupplement(home, name string, sub []string, display string) (entry, error) {
	skillsDir := UserSkillsDir(home)
	fi, err := os.Lstat(skillsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return entry{}, nil
	}
	if err != nil {
		return entry{}, fmt.Errorf("user skills folder: %w", cleanPathErr(err))
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return entry{}, fmt.Errorf("user skills folder is a symlink: %w", ErrPathEscape)
	}
	return inspect(skillsDir, append([]string{name, referencesDir}, sub...), display)
}

// merge combines the skill's entry with the supplement's.
func merge(own, sup entry, name, display string) (string, error) {
	switch {
	case own.kind == missing && sup.kind == missing:
		return "", fmt.Errorf("file %q: %w", display, ErrNotFound)
	case own.kind == isDir || (own.kind == missing && sup.kind == isDir):
		var b strings.Builder
		for _, n := range own.listing {
			b.WriteString(n + "\n")
		}
		if sup.kind == isDir {
			for _, n := range sup.listing {
				b.WriteString(n + supplementMark + "\n")
			}
		}
		if b.Len() == 0 {
			return "(empty folder)\n", nil
		}
		return b.String(), nil
	case own.kind == isFile && sup.kind == isFile:
		text := own.text
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		return text + fmt.Sprintf("\n----- user supplement ($PARLEY_HOME/skills/%s/%s) -----\n", name, display) + sup.text, nil
	case own.kind == isFile:
		return own.text, nil
	default: // only the supplement has the file
		return sup.text, nil
	}
}
