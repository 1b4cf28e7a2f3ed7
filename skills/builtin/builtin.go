// Package builtin embeds the skills that ship inside the Parley binary.
// Each top-level folder is one skill; skills.Load extracts them to
// $PARLEY_HOME/skills-cache/NAME/ so tools can read their files.
package builtin

import "embed"

// FS holds the builtin skill folders. The "all:" prefix keeps files whose
// names start with "." or "_" so a skill ships exactly as written.
//
//go:embed all:skill-authoring all:web-access
var FS embed.FS
