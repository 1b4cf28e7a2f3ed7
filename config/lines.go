package config

import (
	"fmt"
	"os"
)

// Lines says on which line of the configuration file each key is set,
// for the checks of packages config cannot import (the policies' tool
// and skill names, which only the tool sources and the skill layers can
// check): their problems name the line as config's own do.
type Lines struct{ file *fileIndex }

// ReadLines reads where the keys of the file at path are (PARLEY_CONFIG
// when path is ""). No file gives Lines that know no line.
func ReadLines(path string, getenv func(string) string) (Lines, error) {
	if path == "" {
		path = getenv("PARLEY_CONFIG")
	}
	if path == "" {
		return Lines{file: &fileIndex{}}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Lines{file: &fileIndex{}}, fmt.Errorf("config: %w", err)
	}
	cfg := Default()
	file, _, err := decode(data, &cfg)
	if err != nil {
		return Lines{file: &fileIndex{}}, fmt.Errorf("config %s: %w", path, err)
	}
	return Lines{file: file}, nil
}

// Of returns the line of key ("policies.default.tools.deny[1]"), or of
// the nearest key above it that the file sets.
func (l Lines) Of(key string) (int, bool) {
	if l.file == nil {
		return 0, false
	}
	e, ok := l.file.lookup(key)
	return e.line, ok
}
