package install

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
)

const module = "github.com/parleyhq/parley/"

// TestEveryPlatformRunsTheContract: each adapter package linked in here
// has a test that calls channeltest.Run, so a new platform cannot skip the
// contract.
func TestEveryPlatformRunsTheContract(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "install.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Imports) == 0 {
		t.Fatal("install.go imports no platform")
	}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		dir := filepath.Join("..", "..", strings.TrimPrefix(path, module))
		tests, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		runs := false
		for _, name := range tests {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "channeltest.Run(") {
				runs = true
			}
		}
		if !runs {
			t.Errorf("%s has no test calling channeltest.Run", path)
		}
	}
}

// TestEverySectionOpensItsChannel: serve opens a platform through its
// section, so every section must implement channels.Opener.
func TestEverySectionOpensItsChannel(t *testing.T) {
	if len(config.Platforms()) < 4 {
		t.Fatalf("registered platforms: %v", config.PlatformNames())
	}
	for _, p := range config.Platforms() {
		if p.NewConfig == nil {
			continue
		}
		if _, ok := p.NewConfig().(channels.Opener); !ok {
			t.Errorf("the section of %s (%T) does not implement channels.Opener", p.Name, p.NewConfig())
		}
	}
}
