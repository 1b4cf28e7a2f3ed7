// Package listener is what every HTTP listener of parley serve puts in
// front of its routes: deadlines on every phase of a request, a bound on
// the requests reading a body at once, and the time each webhook takes to
// be answered. It knows no route; the caller mounts them.
package listener

import (
	"net/http"

	"github.com/parleyhq/parley/config"
)

// MaxHeaderBytes bounds a request's header block.
const MaxHeaderBytes = 64 << 10

// New is an HTTP server with every phase of a request under a deadline
// (the server: section), so a slow client is cut off.
func New(c config.Server, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}

// LimitBodies lets at most n requests with a body be read and handled at
// once. One more is answered 503 at once, its body unread, and its
// connection closed: together with the server's read deadline this bounds
// the memory that clients — unauthenticated ones included, since
// authentication needs the whole body — can pin by sending bodies slowly.
// Requests without a body (probes, /metrics) never wait for a slot.
// refused, when set, is called for each request refused.
func LimitBodies(n int, next http.Handler, refused func()) http.Handler {
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			next.ServeHTTP(w, r)
		default:
			if refused != nil {
				refused()
			}
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}
	})
}
