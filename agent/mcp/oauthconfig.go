package mcp

import (
	"fmt"
	"net/url"

	"github.com/parleyhq/parley/config"
)

// OAuth grants (OAuthConfig.Grant).
const (
	// GrantAuthorizationCode: an operator signs in once with `parley mcp
	// login NAME`; every replica then uses and refreshes that sign-in.
	GrantAuthorizationCode = "authorization_code"
	// GrantClientCredentials: a machine account; Parley gets its own
	// tokens with ClientID and ClientSecret, no person involved.
	GrantClientCredentials = "client_credentials"
)

// OAuthConfig is tools.mcp.servers.NAME.oauth: sign in to a server that
// asks for OAuth (a 401 with WWW-Authenticate), per the MCP authorization
// spec. Parley discovers the authorization server from the server's
// protected resource metadata; nothing here names endpoints.
//
// The client is identified, in this order, by a client ID metadata
// document (ClientMetadataURL) when the authorization server supports
// them, by a pre-registered ClientID (and ClientSecret), else by dynamic
// client registration.
type OAuthConfig struct {
	// Grant is GrantAuthorizationCode (the default) or
	// GrantClientCredentials.
	Grant string `yaml:"grant,omitempty"`
	// ClientID and ClientSecret are a pre-registered client. The secret
	// never prints; put it in ${NAME}.
	ClientID     string                `yaml:"client_id,omitempty"`
	ClientSecret config.SecretTemplate `yaml:"client_secret,omitempty"`
	// ClientMetadataURL is the https URL of Parley's client ID metadata
	// document, used as its client_id where supported.
	ClientMetadataURL string `yaml:"client_metadata_url,omitempty"`
	// RedirectURL is where the authorization server sends the operator
	// back: the admin console's /admin/mcp/oauth/callback, as the console
	// is reached from a browser. Required for the authorization code.
	RedirectURL string `yaml:"redirect_url,omitempty"`
	// Scopes, when set, are asked for instead of those the server's
	// challenge or metadata name.
	Scopes []string `yaml:"scopes,omitempty"`
}

// CallbackPath is the admin console's route the authorization server
// redirects the operator to.
const CallbackPath = "/admin/mcp/oauth/callback"

func (o *OAuthConfig) grant() string {
	if o.Grant == "" {
		return GrantAuthorizationCode
	}
	return o.Grant
}

func (o *OAuthConfig) validate(key string, c ServerConfig) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.oauth.%s: %s", key, field, fmt.Sprintf(format, args...)))
	}
	if c.URL == "" {
		errs = append(errs, fmt.Errorf("%s.oauth: only for a url server", key))
	}
	if _, ok := c.Headers["Authorization"]; ok {
		errs = append(errs, fmt.Errorf("%s.oauth: the server also has an Authorization header; use one or the other", key))
	}
	if err := config.CheckEnvRefs(o.ClientSecret.Reveal()); err != nil {
		bad("client_secret", "%v", err)
	}
	switch o.grant() {
	case GrantAuthorizationCode:
		if u, err := url.Parse(o.RedirectURL); o.RedirectURL == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("redirect_url", "an absolute URL of the admin console's %s is required for the authorization code", CallbackPath)
		}
	case GrantClientCredentials:
		if o.ClientID == "" || !o.ClientSecret.IsSet() {
			bad("grant", "client_credentials needs client_id and client_secret")
		}
	default:
		bad("grant", "%q is not %s or %s", o.Grant, GrantAuthorizationCode, GrantClientCredentials)
	}
	if o.ClientMetadataURL != "" {
		if u, err := url.Parse(o.ClientMetadataURL); err != nil || u.Scheme != "https" || u.Path == "" || u.Path == "/" {
			bad("client_metadata_url", "must be an https URL with a path")
		}
	}
	return errs
}
