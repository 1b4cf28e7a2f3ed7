package mcp

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parleyhq/parley/config"
	"go.yaml.in/yaml/v3"
)

// Header values name environment variables; they are expanded at connect
// time, reach the server, and never appear in a state, an error, a log
// line or the printed configuration.
func TestHeaderSecretsAreExpandedAndNeverShown(t *testing.T) {
	const secret = "s3cret-token-4711"
	requireToken := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if got := r.Header.Get("Authorization"); got != "Bearer "+secret {
				// A careless server echoes what it was sent.
				http.Error(w, "bad credentials: "+got+" "+r.URL.RawQuery, http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	srv, _ := httpServer(t, testServerOptions{name: "gh"}, requireToken)
	closed := closedURL(t)
	env := map[string]string{"GOOD_TOKEN": secret, "WRONG_TOKEN": "wrong-token-0815", "URL_KEY": "url-key-9999"}
	header := func(v string) map[string]config.SecretTemplate {
		return map[string]config.SecretTemplate{"Authorization": config.SecretTemplate("Bearer ${" + v + "}")}
	}
	cfg := Config{Servers: map[string]ServerConfig{
		"good":    {URL: srv.URL, Headers: header("GOOD_TOKEN")},
		"wrong":   {URL: srv.URL + "?key=${URL_KEY}", Headers: header("WRONG_TOKEN")},
		"unset":   {URL: srv.URL, Headers: header("NO_SUCH_TOKEN")},
		"refused": {URL: closed + "/mcp?key=${URL_KEY}", Headers: header("GOOD_TOKEN")},
	}}
	f := newFixture(t, cfg, Options{Getenv: func(k string) string { return env[k] }})
	f.start(t)

	if out, err := f.call(t, context.Background(), "good__lookup", `{"key":"k"}`); err != nil || out != "gh has k" {
		t.Errorf("call with the expanded token = %q, %v", out, err)
	}
	for name, want := range map[string]string{
		"wrong":   "Unauthorized",
		"unset":   "header Authorization: environment variable NO_SUCH_TOKEN is not set",
		"refused": "connection refused",
	} {
		if st := f.state(t, name); st.Up || !strings.Contains(st.Err, want) {
			t.Errorf("%s = %+v, want down: %s", name, st, want)
		}
	}
	printed, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]string{"log": f.log.String(), "printed config": string(printed)}
	for _, st := range f.m.Servers() {
		shown["state of "+st.Name] = fmt.Sprintf("%+v", st)
	}
	for where, text := range shown {
		for _, v := range env {
			if strings.Contains(text, v) {
				t.Errorf("%s shows the secret %q:\n%s", where, v, text)
			}
		}
	}
	if !strings.Contains(f.log.String(), redacted) {
		t.Error("nothing was redacted: the test did not provoke a message carrying a secret")
	}
	// The values only name variables: they print as written, so an
	// operator sees where each comes from.
	if !strings.Contains(string(printed), "Authorization: Bearer ${GOOD_TOKEN}") {
		t.Errorf("printed config does not show the header's reference:\n%s", printed)
	}
}

// closedURL is the URL of a port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// Headers go to the server's own origin only: a redirect elsewhere is
// refused, so the token cannot follow it.
func TestHeadersStayWithTheServer(t *testing.T) {
	got := make(chan string, 1)
	elsewhere := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go elsewhere.Serve(l)
	t.Cleanup(func() { elsewhere.Close() })
	redirect := httpTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+l.Addr().String()+"/mcp", http.StatusTemporaryRedirect)
	}))
	f := newFixture(t, Config{Servers: map[string]ServerConfig{"r": {URL: redirect, Headers: map[string]config.SecretTemplate{"Authorization": "Bearer ${T}"}}}},
		Options{Getenv: func(string) string { return "token-that-stays" }})
	f.start(t)
	if st := f.state(t, "r"); st.Up || !strings.Contains(st.Err, "redirect to another origin refused") {
		t.Errorf("state = %+v, want down: redirect refused", st)
	}
	select {
	case h := <-got:
		t.Errorf("the other origin was reached, with Authorization %q", h)
	default:
	}
}

// Close leaves nothing behind: stdio servers and what they started are
// gone, calls in flight return, and no goroutine of the Manager, the SDK
// or its HTTP connections is left.
func TestCloseLeavesNoProcessOrGoroutine(t *testing.T) {
	before := goroutineIDs()
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	srv, _ := httpServer(t, testServerOptions{name: "remote", onStart: func() { started <- struct{}{} }, release: release}, nil)
	f := newFixture(t, Config{Servers: map[string]ServerConfig{"local": stdioConfig("local"), "remote": {URL: srv.URL}}}, Options{})
	f.start(t)
	ctx := context.Background()
	pid := callInt(t, f, "local__pid")
	child := callInt(t, f, "local__spawn")
	for _, p := range []int{pid, child} {
		if !alive(p) {
			t.Fatalf("process %d is not running before Close", p)
		}
	}
	inFlight := make(chan error, 1)
	go func() {
		_, err := f.call(t, ctx, "remote__hang", "{}")
		inFlight <- err
	}()
	receive(t, started, "the hanging call to start")

	f.m.Close()
	if err := receive(t, inFlight, "the call in flight to return"); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("call in flight returned %v, want shutting down", err)
	}
	// SIGKILL is delivered asynchronously; a killed process is gone at once.
	waitFor(t, "the server and its child to be gone", func() bool { return !alive(pid) && !alive(child) })
	if names := f.names(); len(names) != 0 {
		t.Errorf("tools still registered after Close: %v", names)
	}
	for _, st := range f.m.Servers() {
		if st.Up || st.Err != "stopped" {
			t.Errorf("state after Close = %+v, want stopped", st)
		}
	}
	if err := f.m.Start(ctx); err == nil {
		t.Error("Start after Close succeeded")
	}
	// The server learns of the abandoned call from notifications/cancelled
	// or from the end of the session, whichever it honours; the SDK's own
	// server waits for its handler before ending a session, so the test
	// lets the handler go before closing the server.
	close(release)
	srv.Close()
	waitFor(t, "the goroutines to end", func() bool { return len(leftovers(before)) == 0 })
	if l := leftovers(before); len(l) > 0 {
		t.Errorf("goroutines left:\n%s", strings.Join(l, "\n\n"))
	}
}

func callInt(t *testing.T, f *fixture, tool string) int {
	t.Helper()
	out, err := f.call(t, context.Background(), tool, "{}")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(out)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// alive reports whether pid is a running process (a zombie is not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

var goroutineHeader = regexp.MustCompile(`^goroutine (\d+) `)

// goroutines returns every goroutine's stack by id.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if m := goroutineHeader.FindStringSubmatch(g); m != nil {
			out[m[1]] = g
		}
	}
	return out
}

func goroutineIDs() map[string]bool {
	ids := map[string]bool{}
	for id := range goroutines() {
		ids[id] = true
	}
	return ids
}

// leftovers are the stacks of goroutines started since before, except the
// caller's own.
func leftovers(before map[string]bool) []string {
	var out []string
	for id, stack := range goroutines() {
		if before[id] || strings.Contains(stack, "leftovers(") {
			continue
		}
		out = append(out, stack)
	}
	slices.Sort(out)
	return out
}

func httpTestServer(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := &http.Server{Handler: h}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

// The class of each tool: write globs, then read globs, then readOnlyHint,
// else write. The agent sees it as Writes.
func TestToolClasses(t *testing.T) {
	srv, _ := httpServer(t, testServerOptions{name: "remote"}, nil)
	f := newFixture(t, Config{Servers: map[string]ServerConfig{
		"plain":    {URL: srv.URL, Tools: ToolFilter{Allow: []string{"lookup", "save_note"}}},
		"override": {URL: srv.URL, Tools: ToolFilter{Allow: []string{"lookup", "save_note", "big"}}, Write: []string{"look*", "big"}, Read: []string{"save_*", "big"}},
	}}, Options{})
	f.start(t)
	want := map[string]ToolState{
		"plain__lookup":       {Original: "lookup", Writes: false, Rule: "readOnlyHint"},
		"plain__save_note":    {Original: "save_note", Writes: true, Rule: "default: no readOnlyHint"},
		"override__lookup":    {Original: "lookup", Writes: true, Rule: `write "look*"`},
		"override__save_note": {Original: "save_note", Writes: false, Rule: `read "save_*"`},
		"override__big":       {Original: "big", Writes: true, Rule: `write "big"`},
	}
	got := map[string]ToolState{}
	for _, st := range f.m.Servers() {
		for _, tool := range st.Tools {
			got[tool.Name] = ToolState{Original: tool.Original, Writes: tool.Writes, Rule: tool.Rule}
			registered, ok := f.reg.Get(tool.Name)
			if !ok || registered.Writes() != tool.Writes {
				t.Errorf("%s: registered as writing=%v, state says %v", tool.Name, ok && registered.Writes(), tool.Writes)
			}
			if src, ok := any(registered).(interface{ Source() string }); !ok || src.Source() != "mcp:"+st.Name {
				t.Errorf("%s: source is not mcp:%s", tool.Name, st.Name)
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("classes =\n%v\nwant\n%v", got, want)
	}
}

// Tool names the chat API would refuse are made valid, cut with a hash
// when too long, and kept apart when they collide; calling the offered
// name calls the server's tool.
func TestOddToolNames(t *testing.T) {
	long := strings.Repeat("a_very_long_tool_name_", 4)
	odd := []string{"a.b", "a_b", "files/read", "工具", long}
	s := newTestServer(testServerOptions{name: "odd"})
	for _, name := range odd {
		addEcho(s, name)
	}
	h := httpTestServer(t, streamable(s))
	f := newFixture(t, Config{Servers: map[string]ServerConfig{"odd": {URL: h, Tools: ToolFilter{Allow: odd}}}}, Options{})
	f.start(t)
	want := map[string]string{
		"a.b":        hashed("odd", "a.b"),
		"a_b":        "odd__a_b",
		"files/read": "odd__files_read",
		"工具":         "odd____",
		long:         hashed("odd", long),
	}
	for original, name := range want {
		if !regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`).MatchString(name) {
			t.Errorf("%q offered as invalid name %q", original, name)
		}
		out, err := f.call(t, context.Background(), name, "{}")
		if err != nil || out != "echo "+original {
			t.Errorf("%s (for %q) = %q, %v", name, original, out, err)
		}
	}
	if got := len(f.names()); got != len(want) {
		t.Errorf("registered %v", f.names())
	}
	if !strings.HasPrefix(hashed("odd", long), "odd__a_very_long") || len(hashed("odd", long)) != 64 {
		t.Errorf("hashed long name = %q", hashed("odd", long))
	}
}
