package mcptest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"
)

// AuthServer is an OAuth 2.1 authorization server written from RFC 6749,
// 7636 (PKCE), 7591 (registration), 8414 (metadata) and 8707 (resource
// indicators), strict where a client can go wrong: single-use codes bound
// to the client, redirect, PKCE challenge and resource; rotating refresh
// tokens. Its authorization endpoint approves at once, standing in for an
// operator who signs in and consents.
type AuthServer struct {
	// URL is the issuer: the metadata is at
	// URL/.well-known/oauth-authorization-server.
	URL string

	mu      sync.Mutex
	clients map[string]authClient
	codes   map[string]codeGrant
	tokens  map[string]Grant // access tokens
	refresh map[string]Grant
	// firstExpiry is the lifetime of tokens issued for a code; refreshed
	// ones live an hour.
	firstExpiry   time.Duration
	refuseRefresh bool
	scopes        string // the scopes granted when none were asked for

	exchanges, refreshes, machine int
}

type authClient struct {
	secret    string
	redirects []string
}

type codeGrant struct {
	client, redirect, challenge, resource, scope string
}

// Grant is what an access or refresh token was issued for.
type Grant struct {
	Resource, Scope, Client string
	Expiry                  time.Time
}

// NewAuthServer serves an AuthServer until the test ends. It knows no
// client: Register one, or let the client register itself (RFC 7591).
func NewAuthServer(t testing.TB) *AuthServer {
	t.Helper()
	a := &AuthServer{
		clients: map[string]authClient{}, codes: map[string]codeGrant{},
		tokens: map[string]Grant{}, refresh: map[string]Grant{},
		firstExpiry: time.Hour, scopes: "read",
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", a.metadata)
	mux.HandleFunc("GET /authorize", a.authorize)
	mux.HandleFunc("POST /token", a.token)
	mux.HandleFunc("POST /register", a.register)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	a.URL = srv.URL
	return a
}

// Register pre-registers a client: its id, secret and the redirect URLs
// the authorization endpoint accepts for it.
func (a *AuthServer) Register(id, secret string, redirects ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.clients[id] = authClient{secret: secret, redirects: redirects}
}

// SetFirstExpiry sets the lifetime of the tokens issued for a code.
func (a *AuthServer) SetFirstExpiry(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.firstExpiry = d
}

// RefuseRefresh makes every refresh from now on fail with invalid_grant,
// as when the person revoked the sign-in.
func (a *AuthServer) RefuseRefresh() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refuseRefresh = true
}

// Counts are the code exchanges, refreshes and client credentials grants
// the server answered with tokens.
func (a *AuthServer) Counts() (exchanges, refreshes, machine int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.exchanges, a.refreshes, a.machine
}

// Issued is what the access token was issued for, if a issued it.
func (a *AuthServer) Issued(access string) (Grant, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.tokens[access]
	return g, ok
}

// Secrets are every access and refresh token a issued and every client
// secret it knows: what must never reach a log or an answer.
func (a *AuthServer) Secrets() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for k := range a.tokens {
		out = append(out, k)
	}
	for k := range a.refresh {
		out = append(out, k)
	}
	for _, c := range a.clients {
		if c.secret != "" {
			out = append(out, c.secret)
		}
	}
	return out
}

func (a *AuthServer) metadata(w http.ResponseWriter, _ *http.Request) {
	base := a.URL
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer": base, "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token",
		"registration_endpoint": base + "/register", "response_types_supported": []string{"code"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token", "client_credentials"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "none"},
		"scopes_supported":                      []string{"read", "write", "offline_access"},
	})
}

// authorize redirects at once, with a code, to a redirect registered for
// the client.
func (a *AuthServer) authorize(w http.ResponseWriter, r *http.Request) {
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

func (a *AuthServer) register(w http.ResponseWriter, r *http.Request) {
	var m struct {
		RedirectURIs []string `json:"redirect_uris"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil || len(m.RedirectURIs) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	id, secret := "dyn-"+rand.Text(), "dyn-secret-"+rand.Text()
	a.Register(id, secret, m.RedirectURIs...)
	writeJSON(w, http.StatusCreated, map[string]any{"client_id": id, "client_secret": secret, "redirect_uris": m.RedirectURIs, "token_endpoint_auth_method": "client_secret_basic"})
}

func (a *AuthServer) token(w http.ResponseWriter, r *http.Request) {
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
	switch f.Get("grant_type") {
	case "authorization_code":
		a.exchange(w, id, f)
	case "refresh_token":
		a.refreshGrant(w, id, f)
	case "client_credentials":
		if f.Get("resource") == "" {
			refuse(w, "invalid_target")
			return
		}
		a.machine++
		a.issue(w, Grant{Resource: f.Get("resource"), Client: id, Scope: a.scopes}, time.Hour, false)
	default:
		refuse(w, "unsupported_grant_type")
	}
}

// exchange answers the authorization code grant; a.mu is held.
func (a *AuthServer) exchange(w http.ResponseWriter, id string, f url.Values) {
	g, ok := a.codes[f.Get("code")]
	delete(a.codes, f.Get("code")) // single use, even when refused
	sum := sha256.Sum256([]byte(f.Get("code_verifier")))
	switch {
	case !ok || g.client != id || g.redirect != f.Get("redirect_uri"):
		refuse(w, "invalid_grant")
	case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
		refuse(w, "invalid_grant")
	case f.Get("resource") != g.resource:
		refuse(w, "invalid_target")
	default:
		a.exchanges++
		scope := a.scopes
		if g.scope != "" {
			scope = g.scope // what the operator approved
		}
		a.issue(w, Grant{Resource: g.resource, Client: id, Scope: scope}, a.firstExpiry, true)
	}
}

// refreshGrant answers the refresh token grant, rotating the refresh
// token; a.mu is held.
func (a *AuthServer) refreshGrant(w http.ResponseWriter, id string, f url.Values) {
	g, ok := a.refresh[f.Get("refresh_token")]
	switch {
	case a.refuseRefresh || !ok || g.Client != id:
		refuse(w, "invalid_grant")
	case f.Get("resource") != g.Resource:
		refuse(w, "invalid_target")
	default:
		delete(a.refresh, f.Get("refresh_token"))
		a.refreshes++
		a.issue(w, g, time.Hour, true)
	}
}

// issue writes a token response; a.mu is held.
func (a *AuthServer) issue(w http.ResponseWriter, g Grant, life time.Duration, withRefresh bool) {
	g.Expiry = time.Now().Add(life)
	access := "at-" + rand.Text()
	a.tokens[access] = g
	res := map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": int(life.Seconds()), "scope": g.Scope}
	if withRefresh {
		rt := "rt-" + rand.Text()
		a.refresh[rt] = g
		res["refresh_token"] = rt
	}
	writeJSON(w, http.StatusOK, res)
}

func refuse(w http.ResponseWriter, code string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
