package mcp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/parleyhq/parley/agent/mcp/mcptest"
)

// Test client registered with the authorization server beforehand.
const (
	preClientID     = "parley-client"
	preClientSecret = "pre-registered-secret-value"
	consoleCallback = "https://console.example" + CallbackPath
)

// authServer is an OAuth 2.1 authorization server written from RFC 6749,
// 7636 (PKCE), 7591 (registration), 8414 (metadata) and 8707 (resource
// indicators), strict where a client can go wrong: single-use codes bound
// to the client, redirect, PKCE challenge and resource; rotating refresh
// tokens.
type authServer struct {
	srv *httptest.Server

	mu      sync.Mutex
	clients map[string]testClient
	codes   map[string]codeGrant
	tokens  map[string]issued // access tokens
	refresh map[string]issued
	// firstExpiry is the lifetime of tokens issued for a code; refreshed
	// ones live an hour.
	firstExpiry   time.Duration
	refuseRefresh bool
	scopes        string // the scopes granted, whatever was asked

	exchanges, refreshes, machine int
}

type testClient struct {
	secret    string
	redirects []string
}

type codeGrant struct {
	client, redirect, challenge, resource, scope string
}

type issued struct {
	resource, scope, client string
	expiry                  time.Time
}

func newAuthServer(t *testing.T) *authServer {
	a := &authServer{
		clients: map[string]testClient{preClientID: {secret: preClientSecret, redirects: []string{consoleCallback}}},
		codes:   map[string]codeGrant{}, tokens: map[string]issued{}, refresh: map[string]issued{},
		firstExpiry: time.Hour, scopes: "read",
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", a.metadata)
	mux.HandleFunc("GET /authorize", a.authorize)
	mux.HandleFunc("POST /token", a.token)
	mux.HandleFunc("POST /register", a.register)
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

func (a *authServer) metadata(w http.ResponseWriter, _ *http.Request) {
	base := a.srv.URL
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer": base, "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token",
		"registration_endpoint": base + "/register", "response_types_supported": []string{"code"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token", "client_credentials"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "none"},
		"scopes_supported":                      []string{"read", "write", "offline_access"},
	})
}

// authorize stands in for the operator approving the sign-in: it redirects
// at once, with a code, to a redirect registered for the client.
func (a *authServer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.clients[q.Get("client_id")]
	if !ok || !slices.Contains(c.redirects, q.Get("redirect_uri")) || q.Get("code_challenge_method") != "S256" || q.Get("resource") == "" {
		http.Error(w, "invalid authorization request", http.StatusBadRequest)
		return
	}
	code := rand.Text()
	a.codes[code] = codeGrant{client: q.Get("client_id"), redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge"), resource: q.Get("resource"), scope: q.Get("scope")}
	to, _ := url.Parse(q.Get("redirect_uri"))
	v := to.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	to.RawQuery = v.Encode()
	http.Redirect(w, r, to.String(), http.StatusFound)
}

func (a *authServer) register(w http.ResponseWriter, r *http.Request) {
	var m struct {
		RedirectURIs []string `json:"redirect_uris"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil || len(m.RedirectURIs) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	id, secret := "dyn-"+rand.Text(), "dyn-secret-"+rand.Text()
	a.mu.Lock()
	a.clients[id] = testClient{secret: secret, redirects: m.RedirectURIs}
	a.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"client_id": id, "client_secret": secret, "redirect_uris": m.RedirectURIs, "token_endpoint_auth_method": "client_secret_basic"})
}

func (a *authServer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	f := r.PostForm
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = f.Get("client_id"), f.Get("client_secret")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.clients[id]; !ok || c.secret != secret {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	refuse := func(code string) { writeJSON(w, http.StatusBadRequest, map[string]string{"error": code}) }
	switch f.Get("grant_type") {
	case "authorization_code":
		g, ok := a.codes[f.Get("code")]
		delete(a.codes, f.Get("code")) // single use, even when refused
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		switch {
		case !ok || g.client != id || g.redirect != f.Get("redirect_uri"):
			refuse("invalid_grant")
		case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
			refuse("invalid_grant")
		case f.Get("resource") != g.resource:
			refuse("invalid_target")
		default:
			a.exchanges++
			scope := a.scopes
			if g.scope != "" {
				scope = g.scope // what the operator approved
			}
			a.issue(w, issued{resource: g.resource, client: id, scope: scope}, a.firstExpiry, true)
		}
	case "refresh_token":
		g, ok := a.refresh[f.Get("refresh_token")]
		switch {
		case a.refuseRefresh || !ok || g.client != id:
			refuse("invalid_grant")
		case f.Get("resource") != g.resource:
			refuse("invalid_target")
		default:
			delete(a.refresh, f.Get("refresh_token")) // rotated
			a.refreshes++
			a.issue(w, g, time.Hour, true)
		}
	case "client_credentials":
		if f.Get("resource") == "" {
			refuse("invalid_target")
			return
		}
		a.machine++
		a.issue(w, issued{resource: f.Get("resource"), client: id, scope: a.scopes}, time.Hour, false)
	default:
		refuse("unsupported_grant_type")
	}
}

// issue writes a token response; a.mu is held.
func (a *authServer) issue(w http.ResponseWriter, g issued, life time.Duration, withRefresh bool) {
	g.expiry = time.Now().Add(life)
	access := "at-" + rand.Text()
	a.tokens[access] = g
	res := map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": int(life.Seconds()), "scope": g.scope}
	if withRefresh {
		rt := "rt-" + rand.Text()
		a.refresh[rt] = g
		res["refresh_token"] = rt
	}
	writeJSON(w, http.StatusOK, res)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (a *authServer) counts() (exchanges, refreshes, machine int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.exchanges, a.refreshes, a.machine
}

// protectedServer is a real SDK MCP server behind the SDK's bearer token
// middleware, taking only tokens a issued for its own URL with the scope
// "read"; seen counts the requests each token made.
type protectedServer struct {
	url  string
	mu   sync.Mutex
	seen map[string]int
	// need are the scopes a request needs beyond "read": a token without
	// them gets a 403 with insufficient_scope (RFC 6750 §3.1).
	need []string
}

func (p *protectedServer) require(scopes ...string) {
	p.mu.Lock()
	p.need = scopes
	p.mu.Unlock()
}

func newProtectedServer(t *testing.T, a *authServer, name string) *protectedServer {
	p := &protectedServer{seen: map[string]int{}}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p.url = srv.URL + "/mcp"
	prmURL := srv.URL + "/.well-known/oauth-protected-resource/mcp"
	mux.Handle("GET /.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: p.url, AuthorizationServers: []string{a.srv.URL}, ScopesSupported: []string{"read"},
	}))
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		a.mu.Lock()
		g, ok := a.tokens[token]
		a.mu.Unlock()
		if !ok || g.resource != p.url || time.Now().After(g.expiry) {
			return nil, fmt.Errorf("%w: not a token for this server", auth.ErrInvalidToken)
		}
		p.mu.Lock()
		p.seen[token]++
		p.mu.Unlock()
		return &auth.TokenInfo{Scopes: strings.Fields(g.scope), Expiration: g.expiry}, nil
	}
	stepUp := func(next http.Handler) http.Handler {
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
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prmURL, Scopes: []string{"read"}})(stepUp(mcptest.Handler(mcptest.New(name)))))
	return p
}

func (p *protectedServer) tokensSeen() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.seen {
		out[k] = v
	}
	return out
}

// operator is the operator's browser: it opens the authorization URL and
// follows the authorization server's redirect to the admin console's
// callback, served by console.
func operator(t *testing.T, console http.Handler) func(string) {
	return func(authURL string) {
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Get(authURL)
		if err != nil {
			t.Errorf("opening the authorization URL: %v", err)
			return
		}
		resp.Body.Close()
		loc, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || resp.StatusCode != http.StatusFound {
			t.Errorf("authorization server answered %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
			return
		}
		rec := httptest.NewRecorder()
		console.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, loc.RequestURI(), nil))
		if rec.Code != http.StatusOK {
			t.Errorf("console callback answered %d: %s", rec.Code, rec.Body)
		}
	}
}
