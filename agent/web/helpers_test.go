package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/parleyhq/parley/agent"
)

// fakeNet is the network the tests control: a resolver whose names point
// wherever a test says, and a dialer that carries a connection to a checked
// address to the local test server routed there. Nothing ever leaves the
// loopback interface: an address without a route fails to dial.
type fakeNet struct {
	mu      sync.Mutex
	names   map[string][]netip.Addr
	routes  map[netip.Addr]string // checked address -> httptest listener
	lookups map[string]int
	dialed  []string
	// lookup, when set, replaces names (rebinding tests).
	lookup func(host string, n int) []netip.Addr
}

func newFakeNet() *fakeNet {
	return &fakeNet{names: map[string][]netip.Addr{}, routes: map[netip.Addr]string{}, lookups: map[string]int{}}
}

func (n *fakeNet) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lookups[host]++
	if n.lookup != nil {
		return n.lookup(host, n.lookups[host]), nil
	}
	addrs, ok := n.names[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

func (n *fakeNet) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	n.mu.Lock()
	n.dialed = append(n.dialed, address)
	host, _, _ := net.SplitHostPort(address)
	ip, _ := netip.ParseAddr(host)
	route, ok := n.routes[ip]
	n.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("test network: no route to %s", address)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, route)
}

// name makes host resolve to addrs.
func (n *fakeNet) name(host string, addrs ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range addrs {
		n.names[host] = append(n.names[host], netip.MustParseAddr(a))
	}
}

// serve starts h and routes connections to addr (a string address the
// guard will have checked) to it.
func (n *fakeNet) serve(t *testing.T, addr string, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	n.mu.Lock()
	n.routes[netip.MustParseAddr(addr)] = srv.Listener.Addr().String()
	n.mu.Unlock()
	return srv
}

func (n *fakeNet) dials() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.dialed...)
}

func (n *fakeNet) lookupCount(host string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lookups[host]
}

// publicIP is the address public test names resolve to. It is never
// dialed for real: fakeNet routes it to a local test server.
const publicIP = "93.184.215.14"

type fetchHarness struct {
	tool *fetchTool
	net  *fakeNet
	logs *bytes.Buffer
}

func newFetchHarness(t *testing.T, cfg FetchConfig) *fetchHarness {
	t.Helper()
	n := newFakeNet()
	logs := &bytes.Buffer{}
	tools, err := Tools(Config{Fetch: cfg}, Deps{Resolver: n, Dialer: n, Logger: slog.New(slog.NewJSONHandler(&lockedWriter{w: logs}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return &fetchHarness{tool: tools[0].(*fetchTool), net: n, logs: logs}
}

func (h *fetchHarness) fetch(t *testing.T, url string, offset int) (string, error) {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"url": url, "offset": offset})
	res, err := h.tool.Call(context.Background(), &agent.TurnContext{Channel: "test"}, args)
	if err == nil && len(res.Content) > PageBytes {
		t.Errorf("result of %d bytes is over the %d-byte page", len(res.Content), PageBytes)
	}
	return res.Content, err
}

// lockedWriter lets concurrent log writes share a buffer under -race.
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// text serves body with the given Content-Type.
func text(contentType, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write([]byte(body))
	})
}

func mustContain(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in:\n%s", w, got)
		}
	}
}

func mustNotContain(t *testing.T, got string, unwanted ...string) {
	t.Helper()
	for _, w := range unwanted {
		if strings.Contains(got, w) {
			t.Errorf("unexpected %q in:\n%s", w, got)
		}
	}
}
