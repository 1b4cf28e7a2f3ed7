package outbound_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley/outbound"
)

// countConns starts srv counting the connections it accepts.
func countConns(srv *httptest.Server) *atomic.Int64 {
	var n atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	return &n
}

// TestConcurrentRequestsReuseTheirConnections: rounds of as many
// concurrent requests as the pool holds reuse their connections, where Go's
// default transport keeps only two idle per host and so opens some 14 new
// ones a round (265 here). A connection goes back to the pool on the
// transport's own goroutine after its body is closed, so on a loaded
// machine a round can start before the last one is back and dial one more:
// a few extra over the run are allowed, not one a round.
func TestConcurrentRequestsReuseTheirConnections(t *testing.T) {
	const conns, rounds = 16, 20
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	opened := countConns(srv)
	srv.Start()
	t.Cleanup(srv.Close)
	client := outbound.Client(outbound.Options{Conns: conns})
	for range rounds {
		var wg sync.WaitGroup
		for range conns {
			wg.Go(func() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		wg.Wait()
	}
	if n, most := opened.Load(), int64(conns+rounds/4); n > most {
		t.Fatalf("%d rounds of %d concurrent requests opened %d connections; want at most %d", rounds, conns, n, most)
	}
}

func TestHTTP2WhereTheServerOffersIt(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) }))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tr := outbound.Transport(4)
	tr.TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("spoke %s to a server offering HTTP/2", resp.Proto)
	}
}

// writeCounter is a connection that counts its writes: each is a system
// call of its own.
type writeCounter struct {
	net.Conn
	writes *atomic.Int64
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestARequestGoesOutInOneWrite: a request the size of a model request
// with the tools' schemas (header and a 10 KiB body) is written to its
// connection at once, not a first 4 KiB and then the rest.
func TestARequestGoesOutInOneWrite(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	t.Cleanup(srv.Close)
	tr := outbound.Transport(1)
	var writes atomic.Int64
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return writeCounter{Conn: c, writes: &writes}, nil
	}
	body := bytes.Repeat([]byte("x"), 10<<10)
	resp, err := (&http.Client{Transport: tr}).Post(srv.URL, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if n := writes.Load(); n != 1 {
		t.Fatalf("a request with a %d-byte body took %d writes; want 1", len(body), n)
	}
}

// TestCountedCountsEveryRequestItSends: each request is counted once,
// a redirect's second request too, and the copy leaves the original
// client uncounted.
func TestCountedCountsEveryRequestItSends(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/api/chat.postMessage", http.StatusFound)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	var mu sync.Mutex
	var paths []string
	base := outbound.Client(outbound.Options{})
	counted := outbound.Counted(base, func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		paths = append(paths, r.URL.Path)
	})
	for _, p := range []string{"/api/auth.test", "/moved"} {
		resp, err := counted.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := base.Get(srv.URL + "/api/auth.test")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := []string{"/api/auth.test", "/moved", "/api/chat.postMessage"}
	if len(paths) != len(want) {
		t.Fatalf("counted %q, want %q", paths, want)
	}
	for i := range want {
		if paths[i] != want[i] {
			t.Fatalf("counted %q, want %q", paths, want)
		}
	}
}
