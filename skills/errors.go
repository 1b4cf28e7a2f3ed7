package skills

import "errors"

// Sentinel errors. Returned errors wrap one of these (test with errors.Is) so
// callers can map them to tool outcomes and metrics without parsing text.
var (
	// ErrPathEscape: a path tries to leave its fence (absolute, "..",
	// encoded separators, backslash, NUL, or a symlink on the way).
	ErrPathEscape = errors.New("path escapes the skill folder")
	// ErrNotFound: the skill file or folder does not exist.
	ErrNotFound = errors.New("not found")
	// ErrTooLarge: a file or content exceeds a size limit.
	ErrTooLarge = errors.New("too large")
	// ErrInvalidName: not a valid skill name.
	ErrInvalidName = errors.New("invalid skill name")
	// ErrNotAllowed: the operation is refused by policy (SKILL.md write,
	// non-.md file, non-text content, empty content, hidden file).
	ErrNotAllowed = errors.New("not allowed")
	// ErrBadOffset: a paging offset is negative or past the end.
	ErrBadOffset = errors.New("bad offset")

	// ErrChanged: a skill's SKILL.md is no longer the file the catalog
	// loaded; a reload picks up the new version.
	ErrChanged = errors.New("skill changed on disk")

	// ErrNotUTF8: SKILL.md is not valid UTF-8.
	ErrNotUTF8 = errors.New("not valid UTF-8")
	// ErrNoFrontmatter: SKILL.md does not start with a "---" frontmatter block.
	ErrNoFrontmatter = errors.New("no frontmatter")
	// ErrBadYAML: the frontmatter is not parseable YAML (even after the
	// lenient retry) or is not a mapping.
	ErrBadYAML = errors.New("invalid frontmatter YAML")
	// ErrNoDescription: the description is missing or empty.
	ErrNoDescription = errors.New("missing description")
)
