package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// maxTokenResponse bounds what a token endpoint may answer.
const maxTokenResponse = 1 << 20

// newOAuthHTTPClient is the client of discovery and token requests: it
// follows no redirect (an endpoint that moves is refused, not chased with
// credentials) and ends every request within 30 s.
func newOAuthHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			TLSHandshakeTimeout: 10 * time.Second,
			ForceAttemptHTTP2:   true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// oauthError is a token endpoint's refusal (RFC 6749 §5.2). Its text is
// the endpoint's code and description, never the request's secrets.
type oauthError struct {
	Status      int
	Code        string
	Description string
}

func (e *oauthError) Error() string {
	s := fmt.Sprintf("token endpoint answered %d %s", e.Status, e.Code)
	if e.Description != "" {
		s += ": " + cutText(e.Description, 200)
	}
	return s
}

// tokenResponse is a token endpoint's answer (RFC 6749 §5.1).
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

func (t *tokenResponse) expiry() time.Time {
	if t.ExpiresIn <= 0 {
		return time.Time{}
	}
	return time.Now().Add(time.Duration(t.ExpiresIn) * time.Second)
}

func tokenForm(grantType string, kv ...string) url.Values {
	f := url.Values{"grant_type": {grantType}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Set(kv[i], kv[i+1])
	}
	return f
}

// requestToken posts form to g's token endpoint with the resource
// indicator and the client's credentials, in the header (basic) or the
// body as the endpoint takes them; a public client sends its id alone.
func (c *oauthClient) requestToken(ctx context.Context, g *Grant, form url.Values) (*tokenResponse, error) {
	form.Set("resource", g.Resource)
	basic := g.BasicAuth && g.ClientSecret != ""
	if !basic {
		form.Set("client_id", g.ClientID)
		if g.ClientSecret != "" {
			form.Set("client_secret", g.ClientSecret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, errors.New("the token endpoint is not a valid URL")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic {
		req.SetBasicAuth(url.QueryEscape(g.ClientID), url.QueryEscape(g.ClientSecret))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("token endpoint: %w", stripURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse+1))
	if err != nil || len(body) > maxTokenResponse {
		return nil, fmt.Errorf("token endpoint: the answer is unreadable or over %d bytes", maxTokenResponse)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Code        string `json:"error"`
			Description string `json:"error_description"`
		}
		json.Unmarshal(body, &e)
		return nil, &oauthError{Status: resp.StatusCode, Code: e.Code, Description: e.Description}
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return nil, fmt.Errorf("token endpoint answered %q, not JSON", mt)
	}
	var t tokenResponse
	if err := json.Unmarshal(body, &t); err != nil || t.AccessToken == "" {
		return nil, errors.New("token endpoint: the answer holds no access token")
	}
	if t.TokenType != "" && !strings.EqualFold(t.TokenType, "bearer") {
		return nil, fmt.Errorf("token endpoint issued a %q token, not a bearer token", t.TokenType)
	}
	return &t, nil
}

// stripURLError drops the URL from a transport error: a token endpoint's
// URL may carry a tenant or key.
func stripURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// clientCredentials gets the machine account's token: discovery as for a
// sign-in (protected resource metadata from the challenge or the
// well-known paths, then the authorization server's metadata, with the
// 2025-03-26 fallbacks), then the client_credentials grant for the
// challenged, configured or supported scopes and any asked for before.
func (c *oauthClient) clientCredentials(ctx context.Context, challenges []oauthex.Challenge) error {
	c.mu.Lock()
	resource, secret := c.resource, c.secret
	c.mu.Unlock()
	prm, err := c.resourceMetadata(ctx, challengeParam(challenges, "resource_metadata"), resource)
	if err != nil {
		return err
	}
	asm, err := auth.GetAuthServerMetadata(ctx, prm.AuthorizationServers[0], c.http)
	if err != nil {
		return fmt.Errorf("authorization server metadata: %w", err)
	}
	if asm == nil {
		as := strings.TrimSuffix(prm.AuthorizationServers[0], "/")
		asm = &oauthex.AuthServerMeta{Issuer: as, TokenEndpoint: as + "/token"}
	}
	scopes := c.cfg.Scopes
	if len(scopes) == 0 {
		scopes = strings.Fields(challengeParam(challenges, "scope"))
	}
	if len(scopes) == 0 {
		scopes = prm.ScopesSupported
	}
	prev, _ := c.grant(ctx)
	if prev != nil {
		scopes = union(prev.Scopes, scopes)
	}
	g := &Grant{
		Resource: resource, TokenURL: asm.TokenEndpoint, ClientID: c.cfg.ClientID, ClientSecret: secret, Scopes: scopes,
		BasicAuth: !slices.Contains(asm.TokenEndpointAuthMethodsSupported, "client_secret_post") || slices.Contains(asm.TokenEndpointAuthMethodsSupported, "client_secret_basic"),
	}
	form := tokenForm("client_credentials")
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	tok, err := c.requestToken(ctx, g, form)
	if err != nil {
		return fmt.Errorf("client credentials: %w", err)
	}
	g.AccessToken, g.RefreshToken, g.Expiry = tok.AccessToken, tok.RefreshToken, tok.expiry()
	if err := c.save(ctx, g); err != nil {
		return err
	}
	c.log.Info("mcp: machine account token issued", "scopes", strings.Join(scopes, " "), "expires", g.Expiry)
	return nil
}

// resourceMetadata finds the server's protected resource metadata: at the
// challenge's resource_metadata, then the well-known path of the server's
// URL, then of its root; a server with none is its own authorization
// server (the 2025-03-26 rule).
func (c *oauthClient) resourceMetadata(ctx context.Context, fromChallenge, resource string) (*oauthex.ProtectedResourceMetadata, error) {
	u, err := url.Parse(resource)
	if err != nil {
		return nil, errors.New("the server URL does not parse")
	}
	type candidate struct{ url, resource string }
	var tries []candidate
	if fromChallenge != "" {
		tries = append(tries, candidate{fromChallenge, resource})
	}
	at := *u
	at.Path, at.RawQuery = "/.well-known/oauth-protected-resource/"+strings.TrimLeft(u.Path, "/"), ""
	tries = append(tries, candidate{at.String(), resource})
	root := *u
	root.Path, root.RawQuery = "/.well-known/oauth-protected-resource", ""
	tries = append(tries, candidate{root.String(), (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()})
	for _, t := range tries {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, t.url, t.resource, c.http)
		if err != nil || prm == nil {
			continue
		}
		if len(prm.AuthorizationServers) == 0 {
			return nil, errors.New("the protected resource metadata names no authorization server")
		}
		return prm, nil
	}
	return &oauthex.ProtectedResourceMetadata{Resource: resource, AuthorizationServers: []string{(&url.URL{Scheme: u.Scheme, Host: u.Host}).String()}}, nil
}
