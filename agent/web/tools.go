// Package web holds Parley's builtin web tools: web_fetch, which reads a
// public page as Markdown behind an SSRF guard, and web_search, which asks
// a configured search provider (SearXNG, Brave or Tavily).
//
// The package implements agent.Tool and imports nothing of the gateway or
// the channels. Its results are ordinary tool results: the agent wraps
// every one as untrusted data before the model sees it, which matters here
// more than anywhere, since a web page is exactly where instructions aimed
// at the model hide.
package web

import (
	"fmt"
	"log/slog"

	"github.com/parleyhq/parley/agent"
)

// Deps are what the tools need from their surroundings. The zero value is
// ready for production.
type Deps struct {
	// Logger receives refusals and provider failures; nil discards them.
	Logger *slog.Logger
	// Resolver looks up the hosts web_fetch connects to; nil means
	// net.DefaultResolver.
	Resolver Resolver
	// Dialer connects to the addresses the guard checked; nil means a
	// net.Dialer with a 10 s connect timeout.
	Dialer Dialer
}

// Tools validates cfg and returns the web tools it enables: web_fetch
// always, web_search only when a provider is configured.
func Tools(cfg Config, deps Deps) ([]agent.Tool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	deps.Logger = deps.Logger.With("component", "web")
	fetch, err := newFetchTool(cfg.Fetch.withDefaults(), deps)
	if err != nil {
		return nil, err
	}
	tools := []agent.Tool{fetch}
	if cfg.Search.Enabled() {
		search, err := newSearchTool(cfg.Search.withDefaults(), deps)
		if err != nil {
			return nil, err
		}
		tools = append(tools, search)
	}
	return tools, nil
}
