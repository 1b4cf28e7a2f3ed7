// Package outbound builds the HTTP clients Parley calls its upstreams with
// (the model, each platform's API): one tuned transport per upstream, so
// that the connections one upstream needs are kept open between requests
// instead of being dialled — and, over TLS, handshaken — again for every
// turn. Go's default transport keeps two idle connections per host; with
// sixteen workers calling the same host, fourteen of them would open a new
// connection for nearly every request.
//
// The package depends on nothing of Parley's.
package outbound

import (
	"net"
	"net/http"
	"time"
)

// DefaultConns is the connections kept open per host when Options.Conns is
// zero: the gateway's default worker count.
const DefaultConns = 16

// Timeouts of every transport: a dial or a TLS handshake that takes longer
// is a failure of its own, whatever the request's deadline.
const (
	dialTimeout      = 10 * time.Second
	keepAlive        = 30 * time.Second
	handshakeTimeout = 10 * time.Second
	idleTimeout      = 90 * time.Second
	continueTimeout  = time.Second
)

// writeBuffer is the write buffer of each connection. net/http writes a
// request's header and body through it, and a request that does not fit
// goes out in two writes (two system calls, two segments) instead of one.
// Its default, 4 KiB, is less than a model request carrying the tools'
// schemas (about 4.5 KiB with the built-in tools, more with any history);
// 16 KiB holds that and a short history, or a long answer posted to a
// platform, at 12 KiB more per open connection.
const writeBuffer = 16 << 10

// Options size one upstream's client.
type Options struct {
	// Conns is how many connections to one host stay open between
	// requests: as many as the requests that run at once (the gateway's
	// workers). Zero: DefaultConns.
	Conns int
	// Timeout bounds a whole request, body included (http.Client.Timeout);
	// zero leaves it to the request's context, as long polls need.
	Timeout time.Duration
}

// Client returns an HTTP client with a transport of its own.
func Client(o Options) *http.Client {
	return &http.Client{Transport: Transport(o.Conns), Timeout: o.Timeout}
}

// Transport returns a transport that keeps conns idle connections per host
// (zero: DefaultConns), speaks HTTP/2 where the server offers it over TLS,
// honours the proxy environment variables, and bounds the dial, the TLS
// handshake and idle connections.
func Transport(conns int) *http.Transport {
	if conns <= 0 {
		conns = DefaultConns
	}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          2 * conns,
		MaxIdleConnsPerHost:   conns,
		IdleConnTimeout:       idleTimeout,
		TLSHandshakeTimeout:   handshakeTimeout,
		ExpectContinueTimeout: continueTimeout,
		WriteBufferSize:       writeBuffer,
	}
}

// Counted returns a copy of c whose every request is first passed to
// count, retries and redirects included: a platform's quota counts each
// request it receives, so that is what its calls are counted by.
func Counted(c *http.Client, count func(*http.Request)) *http.Client {
	counted := *c
	next := counted.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	counted.Transport = countingTransport{next: next, count: count}
	return &counted
}

type countingTransport struct {
	next  http.RoundTripper
	count func(*http.Request)
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.count(r)
	return t.next.RoundTrip(r)
}

// CloseIdleConnections passes on to the wrapped transport, so that
// http.Client.CloseIdleConnections still reaches it.
func (t countingTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
