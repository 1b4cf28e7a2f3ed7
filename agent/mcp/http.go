package mcp

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/parleyhq/parley/config"
)

// httpLink prepares a streamable HTTP connection to s: ${NAME} in the URL
// and headers is expanded now, so a token rotated in the environment is
// picked up at the next connect. It returns the transport and a function
// that drops its idle connections.
func httpLink(s *server) (sdk.Transport, func(), error) {
	cfg := s.cfg
	endpoint, err := config.ExpandEnv(cfg.URL, s.m.getenv, s.secrets.remember)
	if err != nil {
		return nil, nil, fmt.Errorf("url: %w", err)
	}
	s.secrets.addURL(endpoint)
	headers, err := expandMap(cfg.Headers, "header", s.m.getenv, s.secrets.remember)
	if err != nil {
		return nil, nil, err
	}
	for _, v := range headers {
		s.secrets.add(v) // a token written into the file is a secret too
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, nil, errors.New("url: not a valid URL")
	}
	base := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   4,
		ForceAttemptHTTP2:     true,
	}
	client := &http.Client{
		// No overall timeout: the standalone event stream lasts as long as
		// the session, and each call has its own deadline.
		Transport: headerTransport{base: base, origin: origin(u), headers: canonicalHeaders(headers)},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if origin(req.URL) != origin(u) {
				return errors.New("redirect to another origin refused")
			}
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			return nil
		},
	}
	t := &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: client, MaxEventSize: maxFrame}
	if s.oauth != nil {
		secret, err := cfg.OAuth.ClientSecret.Expand(s.m.getenv, s.secrets.remember)
		if err != nil {
			return nil, nil, fmt.Errorf("oauth client_secret: %w", err)
		}
		s.secrets.add(secret)
		s.oauth.connect(endpoint, secret)
		t.OAuthHandler = s.oauth
	}
	return t, base.CloseIdleConnections, nil
}

// headerTransport sets the configured headers on requests to the server's
// own origin, and only there, so that no redirect or link can carry its
// token elsewhere.
type headerTransport struct {
	base    http.RoundTripper
	origin  string
	headers http.Header
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) == 0 || origin(req.URL) != t.origin {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header[k] = v
	}
	return t.base.RoundTrip(req)
}

// origin is scheme://host:port of u.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + net.JoinHostPort(u.Hostname(), port)
}
