package layers

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/parleyhq/parley"

// table is the layer table: the layer of each package name and pattern.
type table struct {
	exact    map[string]int // "gateway" → 6
	patterns map[string]int // "gateway/..." → 5, keyed "gateway"
	names    map[int]string // 5 → "the gateway's parts"
}

// readTable reads the ```layers block of the architecture document.
func readTable(path string) (table, error) {
	f, err := os.Open(path)
	if err != nil {
		return table{}, err
	}
	defer f.Close()
	t := table{exact: map[string]int{}, patterns: map[string]int{}, names: map[int]string{}}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "```layers":
			in = true
			continue
		case in && line == "```":
			if len(t.names) == 0 {
				return t, fmt.Errorf("%s: the layers block is empty", path)
			}
			return t, nil
		case !in || line == "":
			continue
		}
		if err := t.addRow(line); err != nil {
			return t, fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := sc.Err(); err != nil {
		return t, err
	}
	return t, fmt.Errorf("%s: no closed ```layers block", path)
}

// addRow adds "N name: pkg pkg/... …".
func (t *table) addRow(line string) error {
	head, pkgs, ok := strings.Cut(line, ":")
	num, name, _ := strings.Cut(head, " ")
	n, err := strconv.Atoi(num)
	if !ok || err != nil {
		return fmt.Errorf("layer row %q is not \"N name: packages\"", line)
	}
	if _, dup := t.names[n]; dup {
		return fmt.Errorf("layer %d is given twice", n)
	}
	t.names[n] = name
	for _, p := range strings.Fields(pkgs) {
		if base, ok := strings.CutSuffix(p, "/..."); ok {
			t.patterns[base] = n
		} else {
			t.exact[p] = n
		}
	}
	return nil
}

// layer returns the layer of pkg (a path relative to the module): its
// name's, else that of the longest pattern above it.
func (t table) layer(pkg string) (int, bool) {
	if n, ok := t.exact[pkg]; ok {
		return n, true
	}
	for dir := pkg; ; {
		i := strings.LastIndex(dir, "/")
		if i < 0 {
			return 0, false
		}
		dir = dir[:i]
		if n, ok := t.patterns[dir]; ok {
			return n, true
		}
	}
}

func firstElement(pkg string) string {
	first, _, _ := strings.Cut(pkg, "/")
	return first
}

// violations lists every package in no layer and every import against
// the layers, given each package's imports of the module's packages.
func (t table) violations(imports map[string][]string) []string {
	var out []string
	for pkg, deps := range imports {
		from, ok := t.layer(pkg)
		if !ok {
			out = append(out, fmt.Sprintf("%s is in no layer of docs/architecture.md", pkg))
			continue
		}
		if strings.HasSuffix(pkg, "test") && t.names[from] != testSupport {
			out = append(out, fmt.Sprintf("%s looks like test support but is in layer %d (%s)", pkg, from, t.names[from]))
		}
		for _, dep := range deps {
			to, ok := t.layer(dep)
			switch {
			case !ok:
				continue // reported as a package of its own
			case to > from:
				out = append(out, fmt.Sprintf("%s (layer %d, %s) imports %s of a higher layer (%d, %s)", pkg, from, t.names[from], dep, to, t.names[to]))
			case to == from && firstElement(pkg) != firstElement(dep):
				out = append(out, fmt.Sprintf("%s imports %s: same layer (%d, %s), another tree", pkg, dep, from, t.names[from]))
			}
		}
	}
	return out
}

// testSupport names the layer of the fakes and test helpers: a package
// named like one (…test) belongs there.
const testSupport = "test support"

// moduleImports lists every package of the module with its non-test
// imports of the module's own packages, paths relative to the module.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		imports[pkg] = nil
		for _, dep := range fields[1:] {
			if rel, ok := strings.CutPrefix(dep, module+"/"); ok {
				imports[pkg] = append(imports[pkg], rel)
			}
		}
	}
	return imports
}

func TestImportsFollowTheLayers(t *testing.T) {
	tab, err := readTable(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	imports := moduleImports(t)
	if len(imports) < 20 {
		t.Fatalf("go list found only %d packages", len(imports))
	}
	for _, v := range tab.violations(imports) {
		t.Error(v)
	}
}

// The rules themselves, on made-up imports: each case must be caught, and
// the allowed ones must not be.
func TestLayerRules(t *testing.T) {
	var tab table
	tab.exact, tab.patterns, tab.names = map[string]int{}, map[string]int{}, map[int]string{}
	for _, row := range []string{
		"1 base: metrics",
		"2 integrations: channels channels/... agent agent/...",
		"3 parts: gateway/...",
		"4 ordering: gateway",
		"5 linking: channels/install",
		"6 commands: cmd/...",
		"7 test support: channels/slack/slacktest",
	} {
		if err := tab.addRow(row); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		imports map[string][]string
		bad     int
	}{
		{"downward and within a tree", map[string][]string{
			"channels/slack": {"channels", "metrics"}, "gateway": {"gateway/outbox", "agent", "channels"},
			"gateway/outbox": {"gateway/approval", "channels"}, "gateway/approval": nil,
			"cmd/parley": {"gateway", "channels/install"}, "channels/install": {"channels/slack"},
		}, 0},
		{"a channel imports the agent", map[string][]string{"channels/slack": {"agent"}}, 1},
		{"the agent imports a channel", map[string][]string{"agent/mcp": {"channels/slack"}}, 1},
		{"a part imports the gateway", map[string][]string{"gateway/outbox": {"gateway"}}, 1},
		{"upward to wiring", map[string][]string{"gateway": {"channels/install"}}, 1},
		{"production imports a fake", map[string][]string{"channels/slack": {"channels/slack/slacktest"}}, 1},
		{"a package in no layer", map[string][]string{"newthing": nil}, 1},
		{"a fake outside test support", map[string][]string{"channels/feishu/feishutest": nil}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tab.violations(tt.imports); len(got) != tt.bad {
				t.Errorf("violations = %d %q, want %d", len(got), got, tt.bad)
			}
		})
	}
}
