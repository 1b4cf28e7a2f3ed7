package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/retry"
)

// The configuration reference, docs/configuration.md, is checked against
// the code: every key of the file (found by walking the config structs of
// this binary, whose platforms and tool sections are the ones it links in)
// and every environment variable (the config's environment table, and
// every name the source reads) must have a row, and every row must name
// something that exists, with the type and default the code has.

const (
	repoRoot   = "../.."
	configDoc  = "docs/configuration.md"
	keysTable  = "key"      // first header cell of a table of keys
	envTable   = "variable" // first header cell of a table of variables
	noKeyCell  = "—"
	levelWord  = "policy level"
	levelKey   = "LEVEL"
	retryWord  = "retry policy"
	retryKey   = "SECTION.retry"
	mapKeyName = "NAME"
)

// docRow is one row of a table of docs/configuration.md.
type docRow struct {
	cells []string
	line  int
}

// readConfigDoc returns the rows of the doc's key tables and variable
// tables by their first cell (unquoted).
func readConfigDoc(t *testing.T) (keys, vars map[string]docRow, text string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, configDoc))
	if err != nil {
		t.Fatalf("%s: %v (the configuration reference must exist)", configDoc, err)
	}
	keys, vars = map[string]docRow{}, map[string]docRow{}
	var table map[string]docRow
	for i, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "|") {
			table = nil
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		switch {
		case cells[0] == keysTable:
			table = keys
			continue
		case cells[0] == envTable:
			table = vars
			continue
		case table == nil || strings.HasPrefix(cells[0], "---"):
			continue
		}
		name := strings.Trim(cells[0], "`")
		if prev, dup := table[name]; dup {
			t.Errorf("%s:%d: `%s` has a row at line %d already", configDoc, i+1, name, prev.line)
		}
		table[name] = docRow{cells: cells, line: i + 1}
	}
	return keys, vars, string(data)
}

// codeKey is one key of the file as the code defines it.
type codeKey struct {
	key, typ string
	// def is the default when the key's path has no placeholder (NAME,
	// [], LEVEL); invalid otherwise.
	def reflect.Value
}

// configKeys walks the configuration of this binary: the core keys, the
// registered top-level sections, the tool sections and the platforms'
// sections, with their defaults.
func configKeys() []codeKey {
	c := config.Default()
	w := &keyWalker{}
	w.walk(reflect.ValueOf(c), "", true)
	for _, s := range config.Sections() {
		w.walk(reflect.ValueOf(c.Sections[s.Name]), s.Name, true)
	}
	for _, s := range config.ToolSections() {
		w.walk(reflect.ValueOf(c.Tools[s.Name]), s.Key(), true)
	}
	for _, p := range config.Platforms() {
		if sec, ok := c.Platforms[p.Name]; ok && sec != nil {
			w.walk(reflect.ValueOf(sec), p.Name, true)
		}
	}
	return w.keys
}

type keyWalker struct {
	keys      []codeKey
	levelDone bool
	retryDone bool
}

var (
	durationType       = reflect.TypeFor[time.Duration]()
	secretType         = reflect.TypeFor[config.Secret]()
	secretURLType      = reflect.TypeFor[config.SecretURL]()
	secretTemplateType = reflect.TypeFor[config.SecretTemplate]()
	levelType          = reflect.TypeFor[config.Level]()
	retryType          = reflect.TypeFor[retry.Config]()
)

func (w *keyWalker) add(key, typ string, v reflect.Value, known bool) {
	k := codeKey{key: key, typ: typ}
	if known {
		k.def = v
	}
	w.keys = append(w.keys, k)
}

// walk adds the rows of v, found at path. known says v is the default
// (not a zero value standing for an entry of a map or a list).
func (w *keyWalker) walk(v reflect.Value, path string, known bool) {
	t := v.Type()
	if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		if v.IsNil() {
			v, known = reflect.Zero(t.Elem()), false
		} else {
			v = v.Elem()
		}
		t = v.Type()
	}
	switch {
	case t == levelType:
		// One level of the policy tree: its keys are documented once,
		// under LEVEL, rather than at each of the four places it sits.
		w.add(path, levelWord, v, false)
		if !w.levelDone {
			w.levelDone = true
			w.fields(reflect.Zero(t), levelKey, false)
		}
	case t == retryType:
		// Every section's retry: has the same three keys: documented
		// once, under SECTION.retry, each section's row giving its
		// defaults.
		w.add(path, retryWord, v, known)
		if !w.retryDone {
			w.retryDone = true
			w.fields(reflect.Zero(t), retryKey, false)
		}
	case t.Kind() == reflect.Struct && t != durationType:
		w.fields(v, path, known)
	case t.Kind() == reflect.Map && isSection(t.Elem()):
		w.add(path, "map of sections", v, known)
		w.walk(reflect.Zero(t.Elem()), path+"."+mapKeyName, false)
	case t.Kind() == reflect.Slice && isSection(t.Elem()):
		w.add(path, "list of sections", v, known)
		w.walk(reflect.Zero(t.Elem()), path+"[]", false)
	default:
		w.add(path, typeWord(t), v, known)
	}
}

func (w *keyWalker) fields(v reflect.Value, path string, known bool) {
	for i := range v.NumField() {
		name, inline, ok := config.YAMLField(v.Type().Field(i))
		switch {
		case !ok:
		case inline:
			w.walk(v.Field(i), path, known)
		default:
			w.walk(v.Field(i), config.JoinKey(path, name), known)
		}
	}
}

func isSection(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && t != durationType
}

// typeWord is how the reference names a Go type.
func typeWord(t reflect.Type) string {
	switch t {
	case durationType:
		return "duration"
	case secretType:
		return "secret"
	case secretURLType:
		return "secret URL"
	case secretTemplateType:
		return "secret template"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Bool:
		return "bool"
	case reflect.Pointer:
		return typeWord(t.Elem())
	case reflect.Slice:
		return "list of " + typeWord(t.Elem()) + "s"
	case reflect.Map:
		return "map of " + typeWord(t.Elem()) + "s"
	}
	return t.String()
}

// renderDefault writes v as the Default column shows it.
func renderDefault(k codeKey) string {
	if !k.def.IsValid() {
		return "…"
	}
	v := k.def
	switch {
	case v.Type() == retryType:
		r := v.Interface().(retry.Config)
		return fmt.Sprintf("`{max_attempts: %d, base: %s, max: %s}`", r.MaxAttempts, shortDuration(r.Base), shortDuration(r.Max))
	case v.Type() == durationType:
		return "`" + shortDuration(time.Duration(v.Int())) + "`"
	case v.Kind() == reflect.Slice && v.Len() == 0:
		return "`[]`"
	case v.Kind() == reflect.Map && v.Len() == 0:
		return "`{}`"
	case v.Kind() == reflect.String && v.Len() == 0:
		return "`\"\"`"
	}
	out, err := yaml.Marshal(v.Interface())
	if err != nil {
		return "…"
	}
	return "`" + strings.TrimSpace(string(out)) + "`"
}

// shortDuration drops the zero units time.Duration.String writes: 1m, not 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// machineDefaults are keys whose default depends on where Parley runs;
// their Default cell is prose.
var machineDefaults = map[string]bool{"home": true, "workspace": true}

// sameDefault reports whether the Default cell of a row, its first
// `quoted` YAML value, decodes to the code's default.
func sameDefault(cell string, def reflect.Value) bool {
	m := regexp.MustCompile("`([^`]*)`").FindStringSubmatch(cell)
	if m == nil {
		return false
	}
	got := reflect.New(def.Type())
	if err := yaml.Unmarshal([]byte(m[1]), got.Interface()); err != nil {
		return false
	}
	if k := def.Kind(); (k == reflect.Slice || k == reflect.Map) && def.Len() == 0 {
		return got.Elem().Len() == 0
	}
	return reflect.DeepEqual(got.Elem().Interface(), def.Interface())
}

func section(key string) string {
	if strings.HasPrefix(key, levelKey+".") {
		return "`policies` (the keys of a level)"
	}
	if strings.HasPrefix(key, retryKey+".") {
		return "Retries (the keys of every `retry:` section)"
	}
	if !strings.ContainsAny(key, ".[") {
		return "Top-level keys"
	}
	top, _, _ := strings.Cut(key, ".")
	top, _, _ = strings.Cut(top, "[")
	if top == config.ToolsKey {
		parts := strings.SplitN(key, ".", 3)
		if len(parts) > 1 {
			return "`tools." + parts[1] + "`"
		}
	}
	return "`" + top + "`"
}

// TestConfigurationReferenceHasEveryKey: a key added to a config struct
// (or a platform's or tool's section) without its row in
// docs/configuration.md fails here with the row to add; a row for a key
// that is gone, or with a type or default the code does not have, fails
// too.
func TestConfigurationReferenceHasEveryKey(t *testing.T) {
	rows, _, _ := readConfigDoc(t)
	want := map[string]bool{}
	for _, k := range configKeys() {
		want[k.key] = true
		row, ok := rows[k.key]
		if !ok {
			t.Errorf("%s has no row for the config key `%s`. Add this row to the table under ## %s, saying what it does:\n| `%s` | %s | %s | … |",
				configDoc, k.key, section(k.key), k.key, k.typ, renderDefault(k))
			continue
		}
		if len(row.cells) < 4 {
			t.Errorf("%s:%d: the row of `%s` needs four cells: | key | type | default | meaning |", configDoc, row.line, k.key)
			continue
		}
		if row.cells[1] != k.typ {
			t.Errorf("%s:%d: `%s` is of type %q in the code, the row says %q: write %q in its type cell", configDoc, row.line, k.key, k.typ, row.cells[1], k.typ)
		}
		if k.def.IsValid() && !machineDefaults[k.key] && !sameDefault(row.cells[2], k.def) {
			t.Errorf("%s:%d: the default of `%s` is %s in the code, the row says %q: fix its default cell", configDoc, row.line, k.key, renderDefault(k), row.cells[2])
		}
	}
	for key, row := range rows {
		if !want[key] {
			t.Errorf("%s:%d: documents the config key `%s`, which the code does not have (renamed or removed?): remove or rename its row", configDoc, row.line, key)
		}
	}
}

// envPrefixes are the first words of Parley's own environment variables:
// a string in the source that is one of them followed by more words is
// taken for a variable's name.
func envPrefixes() []string {
	prefixes := []string{"OTEL"}
	for _, b := range config.EnvBindings() {
		p, _, _ := strings.Cut(b.Name, "_")
		if !slices.Contains(prefixes, p) {
			prefixes = append(prefixes, p)
		}
	}
	return prefixes
}

// notSettings are names the source holds that are no setting of Parley.
var notSettings = map[string]string{
	"PARLEY_MCPTEST_SERVE": "the switch with which the MCP test server re-executes the test binary",
}

// envInSource returns every environment variable name in the module's
// non-test Go files, with where it is: strings that look like one of
// Parley's names, and the argument of every Getenv/LookupEnv-like call
// that is a literal. A name built at run time ("OTEL_" + x) is an error:
// nothing could check it.
func envInSource(t *testing.T) map[string]string {
	t.Helper()
	prefixes := envPrefixes()
	name := regexp.MustCompile(`^(` + strings.Join(prefixes, "|") + `)(_[A-Z0-9]+)+$`)
	partial := regexp.MustCompile(`^(` + strings.Join(prefixes, "|") + `)(_[A-Z0-9]+)*_$`)
	found := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "vendor" || n == "node_modules" || (strings.HasPrefix(n, ".") && n != "." && n != "..") {
				return filepath.SkipDir
			}
			// The benchmark is a developer's tool, not part of the parley binary:
			// the environment it hands its child processes is not Parley's configuration.
			if rel, _ := filepath.Rel(repoRoot, path); rel == filepath.Join("internal", "bench") || rel == filepath.Join("cmd", "parley-bench") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		at := func(n ast.Node) string { return fmt.Sprintf("%s:%d", rel, fset.Position(n.Pos()).Line) }
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(n.Value)
				if err != nil {
					return true
				}
				switch {
				case name.MatchString(s):
					if _, ok := found[s]; !ok {
						found[s] = at(n)
					}
				case partial.MatchString(s):
					t.Errorf("%s: %q starts an environment variable's name that is completed at run time; spell each name out, so that docs/configuration.md can be checked against it", at(n), s)
				}
			case *ast.CallExpr:
				var fn string
				switch f := n.Fun.(type) {
				case *ast.Ident:
					fn = f.Name
				case *ast.SelectorExpr:
					fn = f.Sel.Name
				}
				if (fn == "Getenv" || fn == "getenv" || fn == "LookupEnv") && len(n.Args) == 1 {
					if lit, ok := n.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if s, err := strconv.Unquote(lit.Value); err == nil {
							if _, ok := found[s]; !ok {
								found[s] = at(n)
							}
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for n := range notSettings {
		delete(found, n)
	}
	return found
}

// TestConfigurationReferenceHasEveryVariable: an environment variable the
// config binds, or that the source reads, without its row in
// docs/configuration.md fails here with the row to add; a row (or any
// `NAME` in the text) for a variable nothing reads fails too, and so
// does a row that does not name the key its variable overrides.
func TestConfigurationReferenceHasEveryVariable(t *testing.T) {
	t.Parallel() // reads the tree only
	_, rows, text := readConfigDoc(t)
	want := map[string]string{} // name → key it overrides
	where := envInSource(t)
	for _, b := range config.EnvBindings() {
		want[b.Name] = b.Key
	}
	for n := range where {
		if _, ok := want[n]; !ok {
			want[n] = ""
		}
	}
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range want {
			if !yield(n) {
				return
			}
		}
	}) {
		key := want[n]
		keyCell := noKeyCell
		if key != "" {
			keyCell = "`" + key + "`"
		}
		row, ok := rows[n]
		if !ok {
			from := "the config's environment table"
			if w, ok := where[n]; ok {
				from = w
			}
			t.Errorf("%s has no row for the environment variable `%s` (read at %s). Add this row to the table under ## Environment variables, saying what it does:\n| `%s` | %s | … |",
				configDoc, n, from, n, keyCell)
			continue
		}
		if len(row.cells) < 3 {
			t.Errorf("%s:%d: the row of `%s` needs three cells: | variable | overrides | meaning |", configDoc, row.line, n)
			continue
		}
		if key != "" && !strings.Contains(row.cells[1], keyCell) {
			t.Errorf("%s:%d: `%s` overrides %s: its overrides cell says %q", configDoc, row.line, n, keyCell, row.cells[1])
		}
	}
	for n, row := range rows {
		if _, ok := want[n]; !ok {
			t.Errorf("%s:%d: documents the environment variable `%s`, which nothing reads (renamed or removed?): remove or rename its row", configDoc, row.line, n)
		}
	}
	// The prose may name only variables that exist, too.
	looks := regexp.MustCompile("`\\$?([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)`")
	prefix := regexp.MustCompile(`^(` + strings.Join(envPrefixes(), "|") + `)_`)
	for i, line := range strings.Split(text, "\n") {
		for _, m := range looks.FindAllStringSubmatch(line, -1) {
			if _, ok := want[m[1]]; !ok && prefix.MatchString(m[1]) {
				t.Errorf("%s:%d: names `%s`, which nothing reads", configDoc, i+1, m[1])
			}
		}
	}
}

// TestConfigurationReferenceCommandsWork runs every command of the
// reference's sh blocks as written, from the repository's root: `go run
// ./cmd/parley …` and `parley …` through this binary's run, anything else
// as a process. A command followed by "# exits N" must exit N.
func TestConfigurationReferenceCommandsWork(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, configDoc))
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "```"):
			in = !in && (line == "```sh" || line == "```console" || line == "```bash")
		case in && line != "" && !strings.HasPrefix(line, "#"):
			cmds = append(cmds, line)
		}
	}
	if len(cmds) == 0 {
		t.Fatalf("%s shows no command in a sh block", configDoc)
	}
	t.Chdir(root)
	home := t.TempDir()
	for _, line := range cmds {
		t.Run(line, func(t *testing.T) {
			want := 0
			if cmd, code, ok := strings.Cut(line, "# exits "); ok {
				line = strings.TrimSpace(cmd)
				if want, err = strconv.Atoi(strings.TrimSpace(code)); err != nil {
					t.Fatalf("bad exit annotation %q", code)
				}
			}
			words := strings.Fields(line)
			env := map[string]string{"HOME": home, "PATH": os.Getenv("PATH")}
			for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
				k, v, _ := strings.Cut(words[0], "=")
				env[k] = v
				words = words[1:]
			}
			for i, w := range words {
				if strings.ContainsAny(w, `'"|<>;&$*`) {
					t.Fatalf("word %d of %q needs a shell; this test runs commands without one: keep the reference's commands plain", i, line)
				}
			}
			var args []string
			switch {
			case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/parley":
				args = words[3:]
			case len(words) >= 1 && words[0] == "parley":
				args = words[1:]
			}
			var code int
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if args != nil {
				code = run(ctx, args, strings.NewReader(""), &out, &out, mapEnv(env))
			} else {
				cmd := exec.CommandContext(ctx, words[0], words[1:]...)
				cmd.Stdout, cmd.Stderr = &out, &out
				for k, v := range env {
					cmd.Env = append(cmd.Env, k+"="+v)
				}
				if err := cmd.Run(); err != nil {
					code = -1
					if ee, ok := err.(*exec.ExitError); ok {
						code = ee.ExitCode()
					}
				}
			}
			if code != want {
				t.Errorf("%q exited %d, the reference says %d:\n%s", line, code, want, out.String())
			}
		})
	}
}

// TestDocsStandAlone: the README, docs/ and the code refer to nothing
// outside the repository (internal design notes, a shared folder), and the
// user documentation names no issue numbers, which mean nothing to a
// reader of a release.
func TestDocsStandAlone(t *testing.T) {
	t.Parallel() // reads the tree only
	outside := regexp.MustCompile(`\b(DESIGN|PROTOCOLS|STYLE)\.md\b|\.\./shared\b|/work/shared\b`)
	outsideWords := []string{"DESIGN.md", "PROTOCOLS.md", "STYLE.md", "../shared", "/work/shared"} // one in each of outside's branches
	issue := regexp.MustCompile(`(?i)\bissues? #?[0-9]+\b`)
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		if d.IsDir() {
			if n := d.Name(); n == "vendor" || n == "node_modules" || (strings.HasPrefix(n, ".") && rel != "." && n != ".ci") {
				return filepath.SkipDir
			}
			return nil
		}
		if rel == filepath.Join("cmd", "parley", "configdoc_test.go") {
			return nil // the patterns above
		}
		ext := filepath.Ext(path)
		userDoc := ext == ".md" && (rel == "README.md" || strings.HasPrefix(rel, "docs"+string(filepath.Separator)))
		if !userDoc && !slices.Contains([]string{".go", ".md", ".yaml", ".yml", ".json", ".sh", ".toml", ""}, ext) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// Each pattern needs a word of its own in the file: most files have
		// none and are not run through the regexps line by line (seconds
		// of CPU under -race for the whole tree).
		text := string(data)
		checkOutside := slices.ContainsFunc(outsideWords, func(w string) bool { return strings.Contains(text, w) })
		checkIssue := userDoc && strings.Contains(strings.ToLower(text), "issue")
		if !checkOutside && !checkIssue {
			return nil
		}
		for i, line := range strings.Split(text, "\n") {
			if checkOutside {
				if m := outside.FindString(line); m != "" {
					t.Errorf("%s:%d: refers to %s, which is not in the repository: say what the reader needs here, or link a file of the repository", rel, i+1, m)
				}
			}
			if checkIssue {
				if m := issue.FindString(line); m != "" {
					t.Errorf("%s:%d: names %q: the documentation must stand alone; say what changed instead", rel, i+1, m)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
