package metrics

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// boundedLabels are the only label names a Parley metric may use: each
// takes values from a small fixed set (channels, outcomes, reasons, kinds,
// sources, states) or from operator-installed names (skills, tools).
var boundedLabels = map[string]bool{
	"channel": true, "skill": true, "tool": true, "outcome": true,
	"reason": true, "kind": true, "source": true, "state": true,
	// A platform's documented error codes: a small fixed set per platform.
	"code": true,
	// A logged-in bot account: configured by the operator, a handful at most.
	"bot": true,
	// An outbound integration (model, slack, …): a constant in the code.
	"integration": true,
	// An account (app) of a platform: named in the file, a handful at most.
	"account": true,
	// An MCP server: a name the operator configured under
	// tools.mcp.servers, a handful at most.
	"server": true,
	// The quota that refused a message: user, workspace or budget.
	"limit": true,
	// A route of the server's mux ("POST /slack/events"): fixed in the
	// code, or one per WeCom app the operator configured.
	"route": true,
	// A model by its name in the configuration (default, or a key of
	// models:), never the name a server reports: a handful at most. From
	// and to are models too (parley_llm_fallbacks_total).
	"model": true, "from": true, "to": true,
	// A schedule by its name under triggers.schedules, or "chat" for
	// every schedule added with /schedule: bounded by the file.
	"schedule": true,
	// A webhook by its name under triggers.webhooks: bounded by the file
	// (a request to an unknown name is answered 404, never counted).
	"trigger": true,
	// A platform API's method: Slack's method name, Feishu's path with its
	// ids written :id, a WeChat op or frame command — names in Parley's
	// code, and anything else "other" (parley_platform_calls_total).
	"method": true,
}

func TestLabelsAreBounded(t *testing.T) {
	for _, d := range New().Declared() {
		if !strings.HasPrefix(d.Name, "parley_") {
			t.Errorf("%s does not start with parley_", d.Name)
		}
		for _, l := range d.Labels {
			if !boundedLabels[l] {
				t.Errorf("%s has label %q, which is not one of the bounded labels (ids — users, chats, messages, conversations — must never be labels)", d.Name, l)
			}
		}
	}
}

func TestEveryFieldIsRegisteredAndDeclared(t *testing.T) {
	m := New()
	v := reflect.ValueOf(m).Elem()
	collectors := 0
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if !f.IsExported() || f.Name == "Registry" {
			continue
		}
		if _, ok := v.Field(i).Interface().(prometheus.Collector); !ok {
			t.Errorf("field %s is not a collector", f.Name)
			continue
		}
		if v.Field(i).IsNil() {
			t.Errorf("field %s is never created in New", f.Name)
		}
		collectors++
	}
	if collectors != len(m.Declared()) {
		t.Errorf("%d collector fields but %d declared metrics", collectors, len(m.Declared()))
	}
}

// recordingMethods are the calls that update a collector.
var recordingMethods = map[string]bool{
	"WithLabelValues": true, "With": true, "Inc": true, "Dec": true, "Add": true,
	"Set": true, "Observe": true, "Sub": true,
}

// TestEveryMetricIsUpdatedSomewhere fails when a metric is declared but no
// production code outside this package ever records to it: a panel on a
// dashboard would stay empty forever.
func TestEveryMetricIsUpdatedSomewhere(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(here))
	used := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "metrics" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			outer, ok := n.(*ast.SelectorExpr)
			if !ok || !recordingMethods[outer.Sel.Name] {
				return true
			}
			if inner, ok := outer.X.(*ast.SelectorExpr); ok {
				used[inner.Sel.Name] = true
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeOf(Metrics{})
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() || f.Name == "Registry" {
			continue
		}
		if !used[f.Name] {
			t.Errorf("metric field %s is declared but never updated by production code", f.Name)
		}
	}
}
