package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/parleyhq/parley/agent/mcp"
	"github.com/parleyhq/parley/config"
)

// The conformance suite's redirect and client ID metadata document.
const (
	redirectURL       = "http://localhost:3000/callback"
	clientMetadataURL = "https://conformance-test.local/client-metadata.json"
)

// serverConfig is tools.mcp.servers.conformance for the scenario: an
// oauth: section for the authorization scenarios, as an operator would
// write it, with the client the scenario registered beforehand (its
// MCP_CONFORMANCE_CONTEXT) when it names one.
func serverConfig(serverURL, scenario, scenarioContext string) (mcp.ServerConfig, error) {
	cfg := mcp.ServerConfig{URL: serverURL}
	if !strings.HasPrefix(scenario, "auth/") {
		return cfg, nil
	}
	var sc struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if scenarioContext != "" {
		if err := json.Unmarshal([]byte(scenarioContext), &sc); err != nil {
			return cfg, fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	o := &mcp.OAuthConfig{ClientID: sc.ClientID, ClientSecret: config.SecretTemplate(sc.ClientSecret)}
	if strings.HasPrefix(scenario, "auth/client-credentials") {
		o.Grant = mcp.GrantClientCredentials
	} else {
		o.RedirectURL, o.ClientMetadataURL = redirectURL, clientMetadataURL
	}
	cfg.OAuth = o
	return cfg, nil
}

// withOAuth lets the Manager sign in itself, as `parley mcp login` does,
// with the suite's authorization server standing in for the operator's
// browser: it redirects at once to the callback with the code.
func withOAuth(_ context.Context, opts *mcp.Options, cfg mcp.ServerConfig) error {
	if cfg.OAuth == nil {
		return nil
	}
	opts.Tokens = &mcp.MemoryTokens{}
	opts.SignIn = followRedirect
	return nil
}

func followRedirect(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		return nil, fmt.Errorf("the authorization server answered %d without a code", resp.StatusCode)
	}
	q := loc.Query()
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}
