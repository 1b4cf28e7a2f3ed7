package listener

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/config"
)

// TestLimitBodiesRefusesPastItsSlots: with every slot held by a request
// reading its body, one more with a body is refused 503 at once, its
// connection closed, and counted; one without a body (a probe) still goes
// through; once a slot is free the next is served.
func TestLimitBodiesRefusesPastItsSlots(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	refused := 0
	h := LimitBodies(1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			<-release
		}
	}), func() { refused++ })
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/hold", strings.NewReader("{}")))
	}()
	<-entered

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/other", strings.NewReader("{}")))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Connection") != "close" || refused != 1 {
		t.Fatalf("past the slots: %d, Connection %q, refused %d; want 503, close, 1", rec.Code, rec.Header().Get("Connection"), refused)
	}
	probe := httptest.NewRecorder()
	h.ServeHTTP(probe, httptest.NewRequest("GET", "/healthz", nil))
	if probe.Code != http.StatusOK {
		t.Fatalf("a request without a body waited for a slot: %d", probe.Code)
	}
	close(release)
	<-done
	after := httptest.NewRecorder()
	h.ServeHTTP(after, httptest.NewRequest("POST", "/other", strings.NewReader("{}")))
	if after.Code != http.StatusOK || refused != 1 {
		t.Fatalf("after the slot was freed: %d, refused %d; want 200, 1", after.Code, refused)
	}
}

func TestNewSetsEveryDeadline(t *testing.T) {
	c := config.Server{ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 3 * time.Second, IdleTimeout: 4 * time.Second}
	s := New(c, http.NotFoundHandler())
	if s.ReadHeaderTimeout != c.ReadHeaderTimeout || s.ReadTimeout != c.ReadTimeout || s.WriteTimeout != c.WriteTimeout ||
		s.IdleTimeout != c.IdleTimeout || s.MaxHeaderBytes != MaxHeaderBytes {
		t.Fatalf("server %+v does not take every deadline of %+v", s, c)
	}
}
