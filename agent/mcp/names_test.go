package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/parleyhq/parley/agent"
)

var functionName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestOfferedNames(t *testing.T) {
	long := strings.Repeat("x", 70)
	long2 := strings.Repeat("x", 69) + "y"
	tests := []struct {
		name    string
		server  string
		tools   []string
		want    map[string]string
		dropped []string
	}{
		{"plain", "gh", []string{"get_issue", "create-pr"}, map[string]string{"get_issue": "gh__get_issue", "create-pr": "gh__create-pr"}, nil},
		{"invalid characters", "fs", []string{"files/read", "a.b", "工具", "with space"},
			map[string]string{"files/read": "fs__files_read", "a.b": "fs__a_b", "工具": "fs____", "with space": "fs__with_space"}, nil},
		{"collision: the unchanged name keeps it", "s", []string{"a.b", "a_b", "a-b"},
			map[string]string{"a.b": hashed("s", "a.b"), "a_b": "s__a_b", "a-b": "s__a-b"}, nil},
		{"collision: all changed get hashes", "s", []string{"a.b", "a/b"},
			map[string]string{"a.b": hashed("s", "a.b"), "a/b": hashed("s", "a/b")}, nil},
		{"too long: cut with a hash", "srv", []string{long, long2},
			map[string]string{long: hashed("srv", long), long2: hashed("srv", long2)}, nil},
		{"exactly 64", "s", []string{strings.Repeat("z", 61)}, map[string]string{strings.Repeat("z", 61): "s__" + strings.Repeat("z", 61)}, nil},
		{"a name shaped like another's hash", "s", []string{"a.b", "a_b", strings.TrimPrefix(hashed("s", "a.b"), "s__")},
			map[string]string{"a.b": hashed("s", "a.b"), "a_b": "s__a_b"}, []string{strings.TrimPrefix(hashed("s", "a.b"), "s__")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dropped := offeredNames(tt.server, tt.tools)
			if !maps.Equal(got, tt.want) || fmt.Sprint(dropped) != fmt.Sprint(tt.dropped) {
				t.Errorf("offeredNames = %v, dropped %v; want %v, dropped %v", got, dropped, tt.want, tt.dropped)
			}
			seen := map[string]bool{}
			for _, n := range got {
				if !functionName.MatchString(n) || seen[n] {
					t.Errorf("%q is invalid or given twice", n)
				}
				seen[n] = true
			}
			// The same set in another order gives the same names.
			reversed := append([]string(nil), tt.tools...)
			for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
				reversed[i], reversed[j] = reversed[j], reversed[i]
			}
			if again, _ := offeredNames(tt.server, reversed); !maps.Equal(again, got) {
				t.Errorf("names depend on order: %v vs %v", again, got)
			}
		})
	}
	h := hashed("srv", long)
	if len(h) != maxName || !strings.HasPrefix(h, "srv__xxxx") || h == hashed("srv", long2) {
		t.Errorf("hashed = %q", h)
	}
}

func TestClassAndFilter(t *testing.T) {
	cfg := ServerConfig{Read: []string{"get_*", "both"}, Write: []string{"get_secret", "both"}}
	trusted := cfg
	trusted.TrustAnnotations = true
	tests := []struct {
		cfg    ServerConfig
		tool   string
		hint   hint
		writes bool
		rule   string
		// claimed: read only by an untrusted readOnlyHint.
		claimed bool
	}{
		{cfg, "get_issue", hintNone, false, `read "get_*"`, false},
		{cfg, "get_secret", hintReadOnly, true, `write "get_secret"`, false},
		{cfg, "both", hintReadOnly, true, `write "both"`, false},
		{cfg, "search", hintReadOnly, false, "readOnlyHint", true},
		{trusted, "search", hintReadOnly, false, "readOnlyHint, trust_annotations", false},
		{trusted, "get_issue", hintReadOnly, false, `read "get_*"`, false},
		{cfg, "create", hintNone, true, "default: no readOnlyHint", false},
		{cfg, "create", hintWrites, true, "readOnlyHint: false", false},
		{trusted, "create", hintWrites, true, "readOnlyHint: false", false},
	}
	for _, tt := range tests {
		got := class(tt.cfg, tt.tool, tt.hint)
		if got.writes != tt.writes || got.rule != tt.rule || got.readClaimed != tt.claimed {
			t.Errorf("class(%s, hint %v, trust %v) = %+v, want %v %q claimed %v", tt.tool, tt.hint, tt.cfg.TrustAnnotations, got, tt.writes, tt.rule, tt.claimed)
		}
	}
	for _, tt := range []struct {
		filter ToolFilter
		tool   string
		want   bool
	}{
		{ToolFilter{}, "any", true},
		{ToolFilter{Allow: []string{}}, "any", false},
		{ToolFilter{Allow: []string{"get_*"}}, "get_x", true},
		{ToolFilter{Allow: []string{"get_*"}}, "put_x", false},
		{ToolFilter{Allow: []string{"get_*"}, Deny: []string{"get_secret"}}, "get_secret", false},
		{ToolFilter{Deny: []string{"*"}}, "x", false},
	} {
		if got := offered(tt.filter, tt.tool); got != tt.want {
			t.Errorf("offered(%+v, %s) = %v", tt.filter, tt.tool, got)
		}
	}
}

func TestSchema(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string // the schema, or the error
	}{
		{"missing", nil, emptySchema},
		{"object", map[string]any{"type": "object", "properties": map[string]any{}}, `{"properties":{},"type":"object"}`},
		{"no type", map[string]any{"properties": map[string]any{}}, `{"properties":{},"type":"object"}`},
		{"keys sorted", map[string]any{"type": "object", "required": []any{"b"}, "additionalProperties": false}, `{"additionalProperties":false,"required":["b"],"type":"object"}`},
		{"string", "x", "input schema is not a JSON object"},
		{"array", []any{}, "input schema is not a JSON object"},
		{"number", 3.0, "input schema is not a JSON object"},
		{"wrong type", map[string]any{"type": "array"}, "input schema has type array, not object"},
		{"type list", map[string]any{"type": []any{"object", "null"}}, "input schema has type [object null], not object"},
		{"huge", map[string]any{"type": "object", "x": strings.Repeat("y", maxSchema)}, "over the 32768-byte limit"},
	}
	for _, tt := range tests {
		got, err := schema(tt.in)
		if err != nil {
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: schema error %v, want %q", tt.name, err, tt.want)
			}
			continue
		}
		if string(got) != tt.want {
			t.Errorf("%s: schema = %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestCut(t *testing.T) {
	for _, n := range []int{0, 100, maxResult, maxResult + 1, 3 * maxResult, 1 << 20} {
		s := strings.Repeat("a", n%3) + strings.Repeat("日", n/3) // three-byte characters
		got := cut(s, maxResult)
		if len(s) <= maxResult {
			if got != s {
				t.Errorf("cut of %d bytes changed it", len(s))
			}
			continue
		}
		if len(got) > maxResult || !utf8.ValidString(got) || !strings.Contains(got, fmt.Sprintf(" of its %d bytes left out]", len(s))) {
			t.Errorf("cut of %d bytes = %d bytes ending %q", len(s), len(got), got[len(got)-60:])
		}
	}
	if got := cutText("  "+strings.Repeat("é", 10)+" ", 9); got != "éééé…" && got != "ééé…" {
		t.Errorf("cutText = %q", got)
	}
}

// A JSON-RPC error from the server becomes a short refusal; a broken
// connection a short failure; neither carries a secret.
func TestCallErrors(t *testing.T) {
	m, err := New(Config{Servers: map[string]ServerConfig{"s": {URL: "https://x"}}}, Options{Registry: agent.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := m.servers[0]
	s.secrets.add("hunter2-secret")
	tl := &tool{name: "s__t", srv: s}
	ctx := context.Background()
	tests := []struct {
		err  error
		want string
	}{
		{&jsonrpc.Error{Code: -32602, Message: "unknown tool t " + strings.Repeat("x", 2000)}, "MCP server s refused the call: unknown tool t xxx"},
		{errors.New("write: broken pipe, token hunter2-secret"), "MCP server s failed: write: broken pipe, token <redacted>"},
	}
	for _, tt := range tests {
		_, _, err := tl.outcome(ctx, ctx, nil, tt.err)
		err = s.secrets.error(err)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) || len(err.Error()) > maxErrorText+100 {
			t.Errorf("outcome(%.40v) = %.200v, want %q", tt.err, err, tt.want)
		}
	}
}

// The redacting log handler hides secrets in messages, attributes, groups
// and errors, including attributes added before the secret was known.
func TestRedactHandler(t *testing.T) {
	var buf bytes.Buffer
	r := &redactor{}
	log := slog.New(redactHandler{inner: slog.NewTextHandler(&buf, nil), r: r}).With("server", "s")
	r.add("tok-123456", "abc") // too short to redact
	r.addURL("https://x/mcp?key=a%20b%2Bc")
	log.Info("sent tok-123456", "header", "Bearer tok-123456", "err", errors.New("GET https://x/mcp?key=a+b%2Bc failed"),
		slog.Group("g", "v", "tok-123456"), "n", 3, "abc", "abc")
	out := buf.String()
	for _, secret := range []string{"tok-123456", "a+b%2Bc", "a b+c"} {
		if strings.Contains(out, secret) {
			t.Errorf("log shows %q: %s", secret, out)
		}
	}
	if !strings.Contains(out, "abc=abc") || !strings.Contains(out, "n=3") || !strings.Contains(out, "server=s") {
		t.Errorf("log lost what is not secret: %s", out)
	}
	err := r.error(fmt.Errorf("late: %w", context.DeadlineExceeded))
	if !errors.Is(r.error(fmt.Errorf("tok-123456: %w", context.DeadlineExceeded)), context.DeadlineExceeded) || err.Error() != "late: context deadline exceeded" {
		t.Error("a redacted error no longer matches its sentinel")
	}
}

func TestClassRules(t *testing.T) {
	tests := []struct {
		cfg  ServerConfig
		want string
	}{
		{ServerConfig{}, "readOnlyHint: read where writes are allowed; otherwise write"},
		{ServerConfig{Read: []string{"get_*", "list_*"}}, `read "get_*", "list_*"; readOnlyHint: read where writes are allowed; otherwise write`},
		{ServerConfig{Read: []string{"*"}, Write: []string{"delete_*"}}, `write "delete_*"; read "*"; readOnlyHint: read where writes are allowed; otherwise write`},
	}
	for _, tt := range tests {
		if got := tt.cfg.ClassRules(); got != tt.want {
			t.Errorf("ClassRules(%+v) = %q, want %q", tt.cfg, got, tt.want)
		}
	}
}
