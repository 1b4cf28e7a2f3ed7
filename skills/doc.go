// Package skills discovers, parses and serves Agent Skills for Parley.
//
// A skill is a folder holding a SKILL.md file (YAML frontmatter plus a
// Markdown body) and optional references/, scripts/ and assets/ folders.
// Skills come from three layers — builtin (embedded, extracted to a cache),
// user ($PARLEY_HOME/skills) and workspace ($PARLEY_WORKSPACE/.parley/skills) —
// and a later layer replaces a same-named skill wholesale.
//
// The package is a pure library: it never talks to a model. It provides the
// catalog (Load, Registry), the system-prompt index (Catalog.Index), search
// (Catalog.Find), the injection message for load_skill (InjectionText,
// ParseInjection), fenced reads of a skill's files (ReadFile), the fenced
// write-back of user notes (Writer.Save), persisted state (State, FileState),
// a strict linter (Lint) and the start-up summary (Catalog.Summary).
//
// Problems with individual skills never stop the others: they are reported
// as Warning values instead of errors.
package skills
