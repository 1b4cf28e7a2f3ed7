package outbound_test

import (
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
// concurrent requests as the pool holds open no more connections than
// that, where Go's default transport keeps only two idle per host.
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
	if n := opened.Load(); n > conns {
		t.Fatalf("%d rounds of %d concurrent requests opened %d connections; want at most %d", rounds, conns, n, conns)
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
