package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/mcp/mcptest"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/internal/redistest"
)

// Test client registered with the authorization server beforehand.
const (
	preClientID     = "parley-client"
	preClientSecret = "pre-registered-secret-value"
	consoleCallback = "https://console.example" + CallbackPath
)

// newAuthServer is an authorization server that knows the pre-registered
// client, redirecting to the console's callback.
func newAuthServer(t *testing.T) *mcptest.AuthServer {
	as := mcptest.NewAuthServer(t)
	as.Register(preClientID, preClientSecret, consoleCallback)
	return as
}

// operator is the operator's browser, with the console's callback served
// by console.
func operator(t *testing.T, console http.Handler) func(string) {
	o := mcptest.Operator{Sites: map[string]http.Handler{"console.example": console}}
	return func(authURL string) { o.SignIn(t, authURL) }
}

// oauthConfig is a server behind OAuth with the pre-registered client.
func oauthConfig(p *mcptest.ProtectedServer, o OAuthConfig) Config {
	if o.RedirectURL == "" {
		o.RedirectURL = consoleCallback
	}
	return Config{Servers: map[string]ServerConfig{"gh": {URL: p.URL, OAuth: &o}}}
}

var preRegistered = OAuthConfig{ClientID: preClientID, ClientSecret: "${GH_SECRET}"}

func getenv(k string) string {
	if k == "GH_SECRET" {
		return preClientSecret
	}
	return ""
}

func redisTokens(t *testing.T) RedisTokens {
	r := redistest.New(t)
	return RedisTokens{Client: r.Client, Prefix: r.Prefix}
}

// login runs `parley mcp login gh` with the operator's browser and the
// console's callback on store.
func login(t *testing.T, cfg Config, store TokenStore) (ServerState, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return Login(ctx, cfg, "gh", LoginOptions{Tokens: store, Getenv: getenv, Show: operator(t, CallbackHandler(store, nil))})
}

// replica is one `parley serve`'s Manager on the shared store.
func replica(t *testing.T, cfg Config, store TokenStore) *fixture {
	t.Helper()
	f := newFixture(t, cfg, Options{Tokens: store, Getenv: getenv})
	f.start(t)
	return f
}

// Before a sign-in the server is down saying how to sign in; after one
// `parley mcp login`, with the code relayed by the console, two replicas
// sharing Redis both use the tokens, and no secret reaches a log.
func TestOAuthLoginServesTwoReplicas(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    OAuthConfig
	}{
		{"pre-registered", preRegistered},
		{"dynamic registration", OAuthConfig{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := newAuthServer(t)
			p := mcptest.NewProtectedServer(t, as, "gh")
			cfg := oauthConfig(p, tc.o)
			store := redisTokens(t)

			before := replica(t, cfg, store)
			if st := before.state(t, "gh"); st.Up || !strings.Contains(st.Err, "not signed in: sign in with `parley mcp login gh`") || st.SignIn != "not signed in: sign in with `parley mcp login gh`" {
				t.Fatalf("before login: up=%v err=%q sign-in=%q", st.Up, st.Err, st.SignIn)
			}
			src := &source{mgr: before.m}
			if down := src.Down(); len(down) != 1 || down[0] != "gh (needs sign-in: not signed in: sign in with `parley mcp login gh`)" {
				t.Fatalf("readiness names %q", down)
			}
			st, err := login(t, cfg, store)
			if err != nil || !st.Up || len(st.Tools) != 2 {
				t.Fatalf("login: %+v, %v", st, err)
			}
			a, b := replica(t, cfg, store), replica(t, cfg, store)
			for i, f := range []*fixture{a, b} {
				got, err := f.call(t, context.Background(), "gh__"+mcptest.ReadTool, `{"key":"k"}`)
				if err != nil || got != "gh has k" {
					t.Fatalf("replica %d: %q, %v", i, got, err)
				}
			}
			waitFor(t, "the first replica to reconnect with the sign-in", func() bool { return before.state(t, "gh").Up })
			if ex, _, _ := as.Counts(); ex != 1 {
				t.Fatalf("%d code exchanges, want the one login", ex)
			}
			if seen := p.TokensSeen(); len(seen) != 1 {
				t.Fatalf("server saw %d tokens, want the one of the login: %v", len(seen), seen)
			}
			g, _ := store.Load(context.Background(), "gh")
			for _, f := range []*fixture{before, a, b} {
				for _, secret := range []string{g.AccessToken, g.RefreshToken, g.ClientSecret, preClientSecret} {
					if secret != "" && strings.Contains(f.log.String(), secret) {
						t.Fatal("a token or secret reached the log")
					}
				}
			}
		})
	}
}

// A token about to end is refreshed before use by one replica; the other
// uses the token it saved. A refresh the authorization server refuses
// puts the server down with the reason and how to sign in again.
func TestOAuthRefresh(t *testing.T) {
	as := newAuthServer(t)
	p := mcptest.NewProtectedServer(t, as, "gh")
	cfg := oauthConfig(p, preRegistered)
	store := redisTokens(t)
	as.SetFirstExpiry(refreshAhead / 2) // within refreshAhead at once
	if _, err := login(t, cfg, store); err != nil {
		t.Fatal(err)
	}
	a, b := replica(t, cfg, store), replica(t, cfg, store)
	for _, f := range []*fixture{a, b} {
		if _, err := f.call(t, context.Background(), "gh__"+mcptest.ReadTool, `{"key":"k"}`); err != nil {
			t.Fatal(err)
		}
	}
	if _, refreshes, _ := as.Counts(); refreshes != 1 {
		t.Fatalf("%d refreshes, want one for both replicas", refreshes)
	}
	g, _ := store.Load(context.Background(), "gh")
	if g.expiresWithin(refreshAhead) {
		t.Fatal("the stored token was not refreshed")
	}

	// The refresh token stops working: the next refresh lapses the sign-in.
	as.RefuseRefresh()
	g.Expiry = time.Now()
	if err := store.Save(context.Background(), "gh", g); err != nil {
		t.Fatal(err)
	}
	c := replica(t, cfg, store)
	st := c.state(t, "gh")
	if st.Up || !strings.Contains(st.Err, "refused to refresh the sign-in (invalid_grant): sign in with `parley mcp login gh`") {
		t.Fatalf("after a refused refresh: up=%v err=%q", st.Up, st.Err)
	}
}

// A server that asks for more scopes (a 403 with insufficient_scope) is
// down saying so, and the next login asks for them with the others.
func TestOAuthStepUpNeedsLogin(t *testing.T) {
	as := newAuthServer(t)
	p := mcptest.NewProtectedServer(t, as, "gh")
	cfg := oauthConfig(p, preRegistered)
	store := redisTokens(t)
	if _, err := login(t, cfg, store); err != nil {
		t.Fatal(err)
	}
	p.Require("write")
	f := replica(t, cfg, store)
	if st := f.state(t, "gh"); st.Up || !strings.Contains(st.SignIn, "the server asks for more scopes (read write): sign in with `parley mcp login gh`") {
		t.Fatalf("after step-up: up=%v err=%q sign-in=%q", st.Up, st.Err, st.SignIn)
	}
	if _, err := login(t, cfg, store); err != nil {
		t.Fatalf("second login: %v", err)
	}
	g, _ := store.Load(context.Background(), "gh")
	if !slices.Contains(g.Scopes, "write") || !slices.Contains(g.Scopes, "read") || g.Lapsed != "" {
		t.Fatalf("second sign-in asked for %v (lapsed %q), want read and write", g.Scopes, g.Lapsed)
	}
	waitFor(t, "the replica to reconnect", func() bool { return f.state(t, "gh").Up })
}

// A machine account gets its own token with the client credentials grant,
// with the resource indicator, and no one signs in.
func TestOAuthClientCredentials(t *testing.T) {
	as := newAuthServer(t)
	p := mcptest.NewProtectedServer(t, as, "gh")
	cfg := oauthConfig(p, OAuthConfig{Grant: GrantClientCredentials, ClientID: preClientID, ClientSecret: "${GH_SECRET}", RedirectURL: "-"})
	f := replica(t, cfg, redisTokens(t))
	got, err := f.call(t, context.Background(), "gh__"+mcptest.ReadTool, `{"key":"k"}`)
	if err != nil || got != "gh has k" {
		t.Fatalf("%q, %v", got, err)
	}
	if _, _, machine := as.Counts(); machine != 1 {
		t.Fatalf("%d client credentials grants, want 1", machine)
	}
}

// A stored token issued for another server is never sent: the server
// sees no token and stays down until a sign-in for it.
func TestOAuthTokenForAnotherResource(t *testing.T) {
	as := newAuthServer(t)
	p := mcptest.NewProtectedServer(t, as, "gh")
	other := mcptest.NewProtectedServer(t, as, "other")
	store := redisTokens(t)
	if _, err := login(t, oauthConfig(other, preRegistered), store); err != nil {
		t.Fatal(err)
	}
	f := replica(t, oauthConfig(p, preRegistered), store)
	if st := f.state(t, "gh"); st.Up || !strings.Contains(st.Err, "not signed in") {
		t.Fatalf("up=%v err=%q", st.Up, st.Err)
	}
	if seen := p.TokensSeen(); len(seen) != 0 {
		t.Fatalf("the other server's token was sent: %v", seen)
	}
}

// The console's callback passes on only an answer a login is waiting for,
// once: a forged or replayed state, a malformed or oversized request, or
// another method is refused with a page that reveals nothing.
func TestOAuthCallbackRefusals(t *testing.T) {
	store := redisTokens(t)
	h := CallbackHandler(store, nil)
	ctx := context.Background()
	if err := store.Expect(ctx, "the-state", "gh", time.Minute); err != nil {
		t.Fatal(err)
	}
	get := func(method string, q url.Values) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, CallbackPath+"?"+q.Encode(), nil))
		return rec.Code, rec.Body.String()
	}
	cases := []struct {
		name   string
		method string
		q      url.Values
		want   int
	}{
		{"forged state", "GET", url.Values{"state": {"guessed"}, "code": {"c"}}, http.StatusBadRequest},
		{"no state", "GET", url.Values{"code": {"c"}}, http.StatusBadRequest},
		{"no code nor error", "GET", url.Values{"state": {"the-state"}}, http.StatusBadRequest},
		{"oversized code", "GET", url.Values{"state": {"the-state"}, "code": {strings.Repeat("c", maxCodeLen+1)}}, http.StatusBadRequest},
		{"oversized state", "GET", url.Values{"state": {strings.Repeat("s", maxStateLen+1)}, "code": {"c"}}, http.StatusBadRequest},
		{"post", "POST", url.Values{"state": {"the-state"}, "code": {"c"}}, http.StatusMethodNotAllowed},
		{"the answer", "GET", url.Values{"state": {"the-state"}, "code": {"the-code"}}, http.StatusOK},
		{"replayed", "GET", url.Values{"state": {"the-state"}, "code": {"the-code"}}, http.StatusBadRequest},
	}
	for _, tc := range cases {
		code, body := get(tc.method, tc.q)
		if code != tc.want {
			t.Errorf("%s: %d, want %d (%s)", tc.name, code, tc.want, body)
		}
		if strings.Contains(body, "the-code") || strings.Contains(body, "guessed") {
			t.Errorf("%s: the page repeats the request: %s", tc.name, body)
		}
	}
	a, err := store.Await(ctx, "the-state")
	if err != nil || a.Code != "the-code" {
		t.Fatalf("the login got %+v, %v", a, err)
	}
}

// A code the authorization server issued for another redirect (another
// client's) fails the exchange: the login fails and nothing is stored.
func TestOAuthLoginWrongRedirect(t *testing.T) {
	as := newAuthServer(t)
	p := mcptest.NewProtectedServer(t, as, "gh")
	as.Register("attacker", "x", "https://evil.example/cb")
	cfg := oauthConfig(p, preRegistered)
	store := redisTokens(t)
	console := CallbackHandler(store, nil)
	swap := func(authURL string) {
		// The attacker's own sign-in, its code delivered under the
		// operator's state.
		u, _ := url.Parse(authURL)
		q := u.Query()
		q.Set("client_id", "attacker")
		q.Set("redirect_uri", "https://evil.example/cb")
		u.RawQuery = q.Encode()
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Get(u.String())
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		rec := httptest.NewRecorder()
		console.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, CallbackPath+"?"+loc.RawQuery, nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Login(ctx, cfg, "gh", LoginOptions{Tokens: store, Getenv: getenv, Show: swap})
	if err == nil || strings.Contains(err.Error(), preClientSecret) {
		t.Fatalf("login = %v, want a failure naming no secret", err)
	}
	if g, _ := store.Load(ctx, "gh"); g != nil {
		t.Fatal("a grant was stored")
	}
}

// The oauth: section is checked with the rest of the configuration.
func TestOAuthConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    ServerConfig
		want string
	}{
		{"stdio", ServerConfig{Command: "x", OAuth: &OAuthConfig{RedirectURL: consoleCallback}}, "only for a url server"},
		{"no redirect", ServerConfig{URL: "https://x/mcp", OAuth: &OAuthConfig{}}, "redirect_url"},
		{"bad grant", ServerConfig{URL: "https://x/mcp", OAuth: &OAuthConfig{Grant: "password"}}, `"password" is not`},
		{"machine without secret", ServerConfig{URL: "https://x/mcp", OAuth: &OAuthConfig{Grant: GrantClientCredentials, ClientID: "a"}}, "needs client_id and client_secret"},
		{"http metadata document", ServerConfig{URL: "https://x/mcp", OAuth: &OAuthConfig{RedirectURL: consoleCallback, ClientMetadataURL: "http://x/c.json"}}, "client_metadata_url"},
		{"with an Authorization header", ServerConfig{URL: "https://x/mcp", Headers: map[string]config.SecretTemplate{"Authorization": "Bearer x"}, OAuth: &OAuthConfig{RedirectURL: consoleCallback}}, "one or the other"},
	} {
		err := Config{Servers: map[string]ServerConfig{"gh": tc.s}}.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	ok := Config{Servers: map[string]ServerConfig{"gh": {URL: "https://x/mcp", OAuth: &OAuthConfig{RedirectURL: consoleCallback, ClientID: "a", ClientSecret: "${S}"}}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid: %v", err)
	}
	if vars := ok.EnvVars(); len(vars) != 1 || vars[0] != "S" {
		t.Errorf("EnvVars = %v, want the client secret's", vars)
	}
}

// The oauth: section loads from the file and prints with its secret
// masked, as `parley config check` prints it.
func TestOAuthConfigPrintsNoSecret(t *testing.T) {
	const secret = "literal-client-secret-in-the-file"
	path := t.TempDir() + "/parley.yaml"
	file := "tools:\n  mcp:\n    servers:\n      linear:\n        url: https://mcp.linear.app/mcp\n        oauth:\n          client_id: parley\n          client_secret: " + secret + "\n          redirect_url: " + consoleCallback + "\n          scopes: [read]\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	o := FromConfig(cfg).Servers["linear"].OAuth
	if o == nil || o.ClientID != "parley" || o.ClientSecret.Reveal() != secret || o.RedirectURL != consoleCallback {
		t.Fatalf("oauth = %+v", o)
	}
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), secret) || !strings.Contains(string(out), "client_id: parley") {
		t.Fatalf("printed:\n%s", out)
	}
}
