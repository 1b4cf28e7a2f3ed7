package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// Refresh timing: a token is refreshed this long before it ends, by the
// replica holding the refresh lock; a stored grant is re-read this often,
// so a refresh by another replica is picked up.
const (
	refreshAhead = time.Minute
	refreshLock  = 30 * time.Second
	grantTTL     = 10 * time.Second
	loginTimeout = 10 * time.Minute
)

// oauthClient is the OAuth side of one server: the token every request
// carries, read from the TokenStore that every replica shares, refreshed
// by one replica at a time; and the sign-in a 401 or an insufficient_scope
// 403 calls for. It implements the SDK's auth.OAuthHandler.
type oauthClient struct {
	server string
	cfg    *OAuthConfig
	store  TokenStore
	http   *http.Client
	log    *slog.Logger
	// signIn runs an authorization code sign-in in this process (`parley
	// mcp login`, the conformance harness); nil in serve, where a server
	// without a sign-in is down until an operator signs in.
	signIn auth.AuthorizationCodeFetcher
	// secret hands every token to the server's redactor: no log line or
	// error of the package, the SDK's included, can show one.
	redact func(...string)
	// fresh ignores the stored grant until this process has signed in:
	// `parley mcp login` signs in anew even while a grant works.
	fresh bool

	mu       sync.Mutex
	resource string // the server URL, set at each connect
	secret   string // client_secret, expanded at each connect
	cached   *Grant
	loaded   time.Time
	code     *auth.AuthorizationCodeHandler // signIn's, kept for step-up
	needs    string                         // errSignIn's last text
}

var _ auth.OAuthHandler = (*oauthClient)(nil)

// errSignIn is why a server that needs an operator's sign-in is down; it
// is kept for ServerState.SignIn until a sign-in is saved.
func (c *oauthClient) errSignIn(why string) error {
	err := fmt.Errorf("%s: sign in with `parley mcp login %s`", why, c.server)
	c.mu.Lock()
	c.needs = err.Error()
	c.mu.Unlock()
	return err
}

// signInNeeded is the last reason a sign-in was found missing or lapsed,
// "" once one works.
func (c *oauthClient) signInNeeded() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.needs
}

// connected forgets why a sign-in was needed: one worked, whichever
// process saved it.
func (c *oauthClient) connected() {
	c.mu.Lock()
	c.needs = ""
	c.mu.Unlock()
}

// signInSaved reports whether the server waits for a sign-in and the
// store now holds a usable one for its URL: saved by `parley mcp login`
// or by another replica since the sign-in was found missing or lapsed
// (each of those leaves the stored grant absent or lapsed, so a grant
// that is neither is new). It reads the store itself, not the cached
// copy.
func (c *oauthClient) signInSaved(ctx context.Context) bool {
	c.mu.Lock()
	waiting, resource := c.needs != "", c.resource
	c.mu.Unlock()
	if !waiting || c.cfg.grant() == GrantClientCredentials {
		return false
	}
	g, err := c.store.Load(ctx, c.server)
	if err != nil || g == nil || g.Lapsed != "" || g.AccessToken == "" || g.Resource != resource {
		return false
	}
	c.redact(g.AccessToken, g.RefreshToken, g.ClientSecret)
	return true
}

// connect sets what this connection's requests are for.
func (c *oauthClient) connect(resource, secret string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resource != resource {
		c.cached, c.code = nil, nil
	}
	c.resource, c.secret = resource, secret
}

// grant returns the stored grant for this server's URL, re-read when the
// copy is old; nil when there is none or it is for another resource.
func (c *oauthClient) grant(ctx context.Context) (*Grant, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fresh {
		return nil, nil
	}
	if c.cached != nil && time.Since(c.loaded) < grantTTL && !c.cached.expiresWithin(refreshAhead) {
		return c.cached, nil
	}
	g, err := c.store.Load(ctx, c.server)
	if err != nil {
		return nil, err
	}
	if g != nil && g.Resource != c.resource {
		// A token is only ever sent to the resource it was issued for.
		g = nil
	}
	if g != nil {
		c.redact(g.AccessToken, g.RefreshToken, g.ClientSecret)
	}
	c.cached, c.loaded = g, time.Now()
	return g, nil
}

func (c *oauthClient) forget() {
	c.mu.Lock()
	c.cached = nil
	c.mu.Unlock()
}

// TokenSource gives the SDK the current token, refreshed when it is about
// to end; nil while there is no usable sign-in, so the request goes
// without one and its 401 says why.
func (c *oauthClient) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	g, err := c.grant(ctx)
	if err != nil || g == nil || g.Lapsed != "" || g.AccessToken == "" {
		return nil, err
	}
	return tokenSourceFunc(func() (*oauth2.Token, error) {
		g, err := c.usable(ctx)
		if err != nil {
			return nil, err
		}
		return &oauth2.Token{AccessToken: g.AccessToken, TokenType: "Bearer", Expiry: g.Expiry}, nil
	}), nil
}

type tokenSourceFunc func() (*oauth2.Token, error)

func (f tokenSourceFunc) Token() (*oauth2.Token, error) { return f() }

// usable returns the grant with a token that does not end within
// refreshAhead, refreshing it when needed.
func (c *oauthClient) usable(ctx context.Context) (*Grant, error) {
	g, err := c.grant(ctx)
	if err != nil {
		return nil, err
	}
	if g == nil || g.Lapsed != "" {
		return nil, c.errSignIn("not signed in")
	}
	if g.expiresWithin(refreshAhead) && g.RefreshToken != "" {
		return c.refresh(ctx, g, false)
	}
	return g, nil
}

// refresh gets a new access token with the refresh token, on one replica
// at a time: the others wait for the grant it saves. force refreshes even
// a token that has not expired (the server refused it).
func (c *oauthClient) refresh(ctx context.Context, g *Grant, force bool) (*Grant, error) {
	release, ok, err := c.store.Lock(ctx, c.server, refreshLock)
	if err != nil {
		return nil, fmt.Errorf("refresh lock: %w", err)
	}
	if !ok {
		return c.awaitRefresh(ctx, g)
	}
	defer release()
	c.forget()
	cur, err := c.grant(ctx)
	if err != nil {
		return nil, err
	}
	if cur == nil || cur.Lapsed != "" {
		return nil, c.errSignIn("not signed in")
	}
	if cur.AccessToken != g.AccessToken || (!force && !cur.expiresWithin(refreshAhead)) {
		return cur, nil // another replica refreshed it first
	}
	tok, err := c.requestToken(ctx, cur, tokenForm("refresh_token", "refresh_token", cur.RefreshToken))
	var oe *oauthError
	if errors.As(err, &oe) && (oe.Code == "invalid_grant" || oe.Code == "invalid_client" || oe.Code == "unauthorized_client") {
		cur.Lapsed = fmt.Sprintf("the authorization server refused to refresh the sign-in (%s)", oe.Code)
		c.save(ctx, cur)
		return nil, c.errSignIn(cur.Lapsed)
	}
	if err != nil {
		return nil, fmt.Errorf("refreshing the sign-in: %w", err)
	}
	next := *cur
	next.AccessToken, next.Expiry = tok.AccessToken, tok.expiry()
	if tok.RefreshToken != "" {
		next.RefreshToken = tok.RefreshToken // rotated
	}
	if err := c.save(ctx, &next); err != nil {
		return nil, err
	}
	c.log.Info("mcp: sign-in refreshed", "expires", next.Expiry)
	return &next, nil
}

// awaitRefresh waits for the replica holding the lock to save a new token.
func (c *oauthClient) awaitRefresh(ctx context.Context, g *Grant) (*Grant, error) {
	ctx, cancel := context.WithTimeout(ctx, refreshLock)
	defer cancel()
	for {
		c.forget()
		cur, err := c.grant(ctx)
		switch {
		case err != nil:
			return nil, err
		case cur == nil || cur.Lapsed != "":
			return nil, c.errSignIn("not signed in")
		case cur.AccessToken != g.AccessToken:
			return cur, nil
		}
		select {
		case <-ctx.Done():
			if !g.expiresWithin(0) {
				return g, nil // still valid: use it while the other replica works
			}
			return nil, errors.New("another replica is refreshing the sign-in and has not finished")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *oauthClient) save(ctx context.Context, g *Grant) error {
	c.redact(g.AccessToken, g.RefreshToken, g.ClientSecret)
	if err := c.store.Save(ctx, c.server, g); err != nil {
		return err
	}
	c.mu.Lock()
	c.cached, c.loaded = g, time.Now()
	if g.Lapsed == "" {
		c.needs = ""
	}
	c.mu.Unlock()
	return nil
}

// Authorize answers a 401, or a 403 with insufficient_scope: the machine
// account gets a token itself; an operator's sign-in is refreshed, or run
// here when this process may (signIn), or else the server is down until
// the operator signs in (again, with the scopes the server asked for).
func (c *oauthClient) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	stepUp := resp.StatusCode == http.StatusForbidden && challengeParam(challenges, "error") == "insufficient_scope"
	if resp.StatusCode == http.StatusForbidden && !stepUp {
		drain(resp)
		return nil // a refusal no sign-in mends: the retry reports it
	}
	if c.cfg.grant() == GrantClientCredentials {
		drain(resp)
		return c.clientCredentials(ctx, challenges)
	}
	if c.signIn != nil {
		return c.authorizationCode(ctx, req, resp)
	}
	drain(resp)
	c.forget()
	g, err := c.grant(ctx)
	switch {
	case err != nil:
		return err
	case g == nil:
		return c.errSignIn("not signed in")
	case g.Lapsed != "":
		return c.errSignIn(g.Lapsed)
	case !stepUp && req.Header.Get("Authorization") != "Bearer "+g.AccessToken:
		// The request went out before this token was stored (another
		// process signed in or refreshed meanwhile): retry with it.
		return nil
	case stepUp:
		wanted := strings.Fields(challengeParam(challenges, "scope"))
		g.Wanted = union(g.Wanted, wanted)
		g.Lapsed = "the server asks for more scopes (" + strings.Join(wanted, " ") + ")"
		c.save(ctx, g)
		return c.errSignIn(g.Lapsed)
	case g.RefreshToken != "":
		if _, err := c.refresh(ctx, g, true); err == nil {
			return nil
		}
	}
	g.Lapsed = "the server refused the sign-in's token"
	c.save(ctx, g)
	return c.errSignIn(g.Lapsed)
}

// authorizationCode runs the SDK's authorization code flow with PKCE and
// the resource indicator (discovery with its fallbacks, client ID metadata
// document, pre-registration or dynamic registration, scopes from the
// challenge or scopes_supported, step-up), saving what it gets.
func (c *oauthClient) authorizationCode(ctx context.Context, req *http.Request, resp *http.Response) error {
	c.mu.Lock()
	h := c.code
	c.mu.Unlock()
	if h == nil {
		var err error
		if h, err = c.newCodeHandler(ctx); err != nil {
			drain(resp)
			return err
		}
		c.mu.Lock()
		c.code = h
		c.mu.Unlock()
	}
	return h.Authorize(ctx, req, resp)
}

func (c *oauthClient) newCodeHandler(ctx context.Context) (*auth.AuthorizationCodeHandler, error) {
	c.mu.Lock()
	secret, resource := c.secret, c.resource
	c.mu.Unlock()
	stored, err := c.store.Load(ctx, c.server)
	if err != nil {
		return nil, err
	}
	var wanted []string
	if stored != nil {
		wanted = stored.Wanted
	}
	hc := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              c.cfg.RedirectURL,
		AuthorizationCodeFetcher: c.signIn,
		RequestRefreshToken:      true,
		Client:                   c.http,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{c.cfg.RedirectURL}, ClientName: "Parley",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		}},
		ScopeFilter: func(discovered []string) []string {
			if len(c.cfg.Scopes) > 0 {
				discovered = c.cfg.Scopes
			}
			return union(discovered, wanted)
		},
		NewTokenSource: func(_ context.Context, oc *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
			g := &Grant{
				AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry,
				Resource: resource, TokenURL: oc.Endpoint.TokenURL, ClientID: oc.ClientID, ClientSecret: oc.ClientSecret,
				BasicAuth: oc.Endpoint.AuthStyle != oauth2.AuthStyleInParams, Scopes: oc.Scopes,
			}
			c.mu.Lock()
			c.fresh = false
			c.mu.Unlock()
			if err := c.save(context.WithoutCancel(ctx), g); err != nil {
				return nil, err
			}
			c.log.Info("mcp: signed in", "scopes", strings.Join(oc.Scopes, " "), "expires", tok.Expiry)
			return oauth2.StaticTokenSource(tok), nil
		},
	}
	if c.cfg.ClientMetadataURL != "" {
		hc.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: c.cfg.ClientMetadataURL}
	}
	if c.cfg.ClientID != "" {
		pre := &oauthex.ClientCredentials{ClientID: c.cfg.ClientID}
		if secret != "" {
			pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: secret}
		}
		hc.PreregisteredClient = pre
	}
	return auth.NewAuthorizationCodeHandler(hc)
}

func challengeParam(cs []oauthex.Challenge, name string) string {
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params[name] != "" {
			return c.Params[name]
		}
	}
	return ""
}

// union is a's scopes followed by b's that a lacks.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}
