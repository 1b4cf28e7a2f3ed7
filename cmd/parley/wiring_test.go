package main

import (
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// The binary names no tool source: tools.go opens whatever
// toolsource.Register'ed, as channels.go opens every platform.
func TestToolsNamesNoToolSource(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "tools.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		for _, source := range []string{"/agent/mcp", "/agent/web"} {
			if strings.HasSuffix(path, source) {
				t.Errorf("tools.go imports %s; open it through toolsource instead", path)
			}
		}
	}
}
