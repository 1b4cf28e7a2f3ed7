package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/parleyhq/parley/config"
)

// searxng speaks a SearXNG instance's JSON API: GET /search?q=…&format=json.
// The instance must list json under search.formats in its settings.yml;
// otherwise it answers 403.
type searxng struct{ base string }

func (p searxng) request(ctx context.Context, query string, _ int) (*http.Request, error) {
	q := url.Values{"q": {query}, "format": {"json"}, "pageno": {"1"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/search?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	return req, nil
}

func (searxng) decode(body []byte) ([]Result, error) { return decodeResults(body) }

// decodeResults reads {"results":[{"title","url","content"}]}, the shape
// SearXNG and Tavily share.
func decodeResults(body []byte) ([]Result, error) {
	var resp struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, err
	}
	out := make([]Result, len(resp.Results))
	for i, r := range resp.Results {
		out[i] = Result{Title: r.Title, URL: r.URL, Snippet: r.Content}
	}
	return out, nil
}

func (searxng) classify(status int, body []byte) (string, string) {
	if status == http.StatusForbidden {
		// SearXNG has no keys: 403 means the JSON format is switched off.
		return KindConfig, "the instance refuses format=json; add json to search.formats in its settings.yml"
	}
	return classifyStatus(status), string(body)
}

// brave speaks the Brave Search API: GET /res/v1/web/search with the key in
// X-Subscription-Token.
type brave struct {
	base string
	key  config.Secret
}

func (p brave) request(ctx context.Context, query string, n int) (*http.Request, error) {
	q := url.Values{"q": {query}, "count": {strconv.Itoa(n)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/res/v1/web/search?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Subscription-Token", p.key.Reveal())
	return req, nil
}

func (brave) decode(body []byte) ([]Result, error) {
	var resp struct {
		Web struct {
			Results []struct {
				Title       string `json:"title"`
				URL         string `json:"url"`
				Description string `json:"description"`
			} `json:"results"`
		} `json:"web"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, err
	}
	out := make([]Result, len(resp.Web.Results))
	for i, r := range resp.Web.Results {
		out[i] = Result{Title: r.Title, URL: r.URL, Snippet: r.Description}
	}
	return out, nil
}

// braveError is Brave's error body:
// {"type":"ErrorResponse","error":{"status":422,"code":"…","detail":"…"}}.
type braveError struct {
	Error struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
	} `json:"error"`
}

func (brave) classify(status int, body []byte) (string, string) {
	var e braveError
	if json.Unmarshal(body, &e) != nil || e.Error.Code == "" {
		return classifyStatus(status), string(body)
	}
	detail := e.Error.Code + ": " + e.Error.Detail
	switch e.Error.Code {
	case "SUBSCRIPTION_TOKEN_INVALID", "SUBSCRIPTION_NOT_FOUND", "UNAUTHORIZED", "OPTION_NOT_IN_PLAN":
		return KindAuth, detail
	case "RATE_LIMITED", "QUOTA_LIMITED":
		return KindQuota, detail
	}
	return classifyStatus(status), detail
}

// tavily speaks the Tavily Search API: POST /search with a JSON body and
// the key as a bearer token.
type tavily struct {
	base string
	key  config.Secret
}

func (p tavily) request(ctx context.Context, query string, n int) (*http.Request, error) {
	body, err := json.Marshal(map[string]any{
		"query":               query,
		"max_results":         n,
		"search_depth":        "basic",
		"topic":               "general",
		"include_answer":      false,
		"include_raw_content": false,
		"include_images":      false,
	})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+"/search", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.key.Reveal())
	return req, nil
}

func (tavily) decode(body []byte) ([]Result, error) { return decodeResults(body) }

// tavilyError is Tavily's error body: {"detail":{"error":"…"}}.
type tavilyError struct {
	Detail struct {
		Error string `json:"error"`
	} `json:"detail"`
}

func (tavily) classify(status int, body []byte) (string, string) {
	var e tavilyError
	if json.Unmarshal(body, &e) == nil && e.Detail.Error != "" {
		return classifyStatus(status), e.Detail.Error
	}
	return classifyStatus(status), string(body)
}
