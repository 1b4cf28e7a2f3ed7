package main

import (
	"net/http"
)

// limitBodies lets at most n requests with a body be read and handled at
// once. One more is answered 503 at once, its body unread, and its
// connection closed: together with the server's read deadline this bounds
// the memory that clients — unauthenticated ones included, since
// authentication needs the whole body — can pin by sending bodies slowly.
// Requests without a body (probes, /metrics) never wait for a slot.
func limitBodies(n int, next http.Handler, refused func()) http.Handler {
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
