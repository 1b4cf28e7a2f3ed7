package mcptest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// ProtectedServer is a real SDK MCP server behind the SDK's bearer token
// middleware, as a hosted MCP server is: a request without a token gets a
// 401 whose WWW-Authenticate names its protected resource metadata
// (RFC 9728), which names the AuthServer. It takes only tokens that
// server issued for its own URL with the scope "read".
type ProtectedServer struct {
	// URL is the MCP endpoint, and the resource its tokens are for.
	URL string

	mu sync.Mutex
	// seen counts the requests made with each bearer token presented,
	// valid or not.
	seen map[string]int
	// need are the scopes a request needs beyond "read": a token without
	// them gets a 403 with insufficient_scope (RFC 6750 §3.1).
	need []string
}

// NewProtectedServer serves New(name) behind a's tokens until the test
// ends.
func NewProtectedServer(t testing.TB, a *AuthServer, name string) *ProtectedServer {
	t.Helper()
	return NewProtectedServerOf(t, a, New(name))
}

// NewProtectedServerOf serves s behind a's tokens until the test ends.
func NewProtectedServerOf(t testing.TB, a *AuthServer, s *sdk.Server) *ProtectedServer {
	t.Helper()
	p := &ProtectedServer{seen: map[string]int{}}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p.URL = srv.URL + "/mcp"
	prmURL := srv.URL + "/.well-known/oauth-protected-resource/mcp"
	mux.Handle("GET /.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: p.URL, AuthorizationServers: []string{a.URL}, ScopesSupported: []string{"read"},
	}))
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		p.mu.Lock()
		p.seen[token]++
		p.mu.Unlock()
		g, ok := a.Issued(token)
		if !ok || g.Resource != p.URL || time.Now().After(g.Expiry) {
			return nil, fmt.Errorf("%w: not a token for this server", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{Scopes: strings.Fields(g.Scope), Expiration: g.Expiry}, nil
	}
	bearer := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prmURL, Scopes: []string{"read"}})
	mux.Handle("/mcp", bearer(p.stepUp(prmURL, Handler(s))))
	return p
}

// stepUp refuses a token without the scopes Require named, asking for
// them.
func (p *ProtectedServer) stepUp(prmURL string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := auth.TokenInfoFromContext(r.Context())
		p.mu.Lock()
		need := p.need
		p.mu.Unlock()
		for _, sc := range need {
			if !slices.Contains(info.Scopes, sc) {
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q, resource_metadata=%q`, strings.Join(append([]string{"read"}, need...), " "), prmURL))
				http.Error(w, "insufficient scope", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Require makes every request need scopes besides "read".
func (p *ProtectedServer) Require(scopes ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.need = scopes
}

// TokensSeen counts the requests made with each bearer token presented,
// whether the server took it or not.
func (p *ProtectedServer) TokensSeen() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.seen))
	for k, v := range p.seen {
		out[k] = v
	}
	return out
}

// Operator is the operator's browser during a sign-in: it opens the
// authorization URL and follows the redirects to the admin console's
// callback, which must answer 200.
type Operator struct {
	// Sites serve hosts that are not on the network, such as a console
	// callback under https://console.example, keyed by host; other hosts
	// are reached over HTTP.
	Sites map[string]http.Handler
}

// SignIn opens authURL and follows it to the callback, failing the test
// (without stopping it, as it is called from the login's goroutine)
// unless the last page answers 200.
func (o Operator) SignIn(t testing.TB, authURL string) {
	client := &http.Client{Transport: sites{o.Sites}, Timeout: time.Minute}
	resp, err := client.Get(authURL)
	if err != nil {
		t.Errorf("opening the authorization URL: %v", err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the sign-in ended at %s with %d", resp.Request.URL.Redacted(), resp.StatusCode)
	}
}

// sites serves the hosts it has handlers for and sends the rest over
// HTTP.
type sites struct{ hosts map[string]http.Handler }

func (s sites) RoundTrip(r *http.Request) (*http.Response, error) {
	h, ok := s.hosts[r.URL.Host]
	if !ok {
		return http.DefaultTransport.RoundTrip(r)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}
