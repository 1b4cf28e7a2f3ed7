package scripts

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestFuzzFindsEveryTarget: scripts/fuzz finds its targets with a pattern,
// not a list; this compares what it finds with every fuzz target Go's own
// parser sees, so a target written in a way the pattern misses (and so never
// fuzzed in CI) fails here.
func TestFuzzFindsEveryTarget(t *testing.T) {
	root := repoRoot(t)
	var want []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// What the go command ignores.
			if n := d.Name(); path != root && (n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !isFuzzName(fn.Name.Name) || !takesTestingF(fn) {
				continue
			}
			dir, _ := filepath.Rel(root, filepath.Dir(path))
			want = append(want, filepath.ToSlash(dir)+" "+fn.Name.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("no fuzz targets in the repository; the parsers of untrusted input have them")
	}
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "fuzz"), "-l")
	cmd.Env = append(cmd.Environ(), "PARLEY_FUZZ_SKIP=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/fuzz -l: %v", err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("scripts/fuzz -l finds\n  %s\nGo's parser finds\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// isFuzzName is the go command's rule: "Fuzz", or "Fuzz" followed by
// anything but a lower-case letter (Fuzzy is no fuzz target).
func isFuzzName(name string) bool {
	rest, ok := strings.CutPrefix(name, "Fuzz")
	if !ok {
		return false
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return rest == "" || !unicode.IsLower(r)
}

// takesTestingF: the one parameter is a *testing.F.
func takesTestingF(fn *ast.FuncDecl) bool {
	ps := fn.Type.Params.List
	if len(ps) != 1 || len(ps[0].Names) > 1 {
		return false
	}
	star, ok := ps[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "F"
}
