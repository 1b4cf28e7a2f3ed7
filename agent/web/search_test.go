package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/config"
)

const testKey = "sk-test-9f8e7d6c5b4a"

// fakeProvider speaks one provider's wire format. It checks the request the
// way the real API would (path, method, key) and answers with the result
// list or the error a test asks for.
type fakeProvider struct {
	provider string
	results  []Result
	// status and body, when set, replace the normal answer.
	status int
	body   string
	// hang, when set, blocks the answer until the request is abandoned or
	// the channel is closed.
	hang chan struct{}
}

func (f *fakeProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.hang != nil {
		// Reading the body lets the server notice the client leaving.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-f.hang:
		}
		return
	}
	if status, body, ok := f.check(r); !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
		return
	}
	if f.status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		_, _ = io.WriteString(w, f.body)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(f.answer(r))
}

// check validates the request and returns the provider's own error when it
// is wrong.
func (f *fakeProvider) check(r *http.Request) (int, string, bool) {
	switch f.provider {
	case ProviderSearXNG:
		if r.Method != http.MethodGet || r.URL.Path != "/search" || r.URL.Query().Get("q") == "" {
			return http.StatusBadRequest, `{"error":"bad request"}`, false
		}
		if r.URL.Query().Get("format") != "json" {
			return http.StatusForbidden, "403 Forbidden", false
		}
	case ProviderBrave:
		if r.Method != http.MethodGet || r.URL.Path != "/res/v1/web/search" || r.URL.Query().Get("q") == "" {
			return 422, `{"type":"ErrorResponse","error":{"id":"1","status":422,"code":"VALIDATION","detail":"Unable to validate request parameter(s)","meta":{}},"time":1754364294}`, false
		}
		if r.Header.Get("X-Subscription-Token") != testKey {
			return 422, `{"type":"ErrorResponse","error":{"id":"2","status":422,"code":"SUBSCRIPTION_TOKEN_INVALID","detail":"The provided subscription token is invalid.","meta":{}},"time":1754364294}`, false
		}
	case ProviderTavily:
		var body struct {
			Query      string `json:"query"`
			MaxResults int    `json:"max_results"`
		}
		if r.Method != http.MethodPost || r.URL.Path != "/search" || json.NewDecoder(r.Body).Decode(&body) != nil || body.Query == "" || body.MaxResults < 1 {
			return http.StatusBadRequest, `{"detail":{"error":"Invalid request body."}}`, false
		}
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			return http.StatusUnauthorized, `{"detail":{"error":"Unauthorized: missing or invalid API key."}}`, false
		}
	}
	return 0, "", true
}

func (f *fakeProvider) answer(r *http.Request) any {
	type item map[string]any
	var items []item
	for _, res := range f.results {
		switch f.provider {
		case ProviderSearXNG:
			items = append(items, item{"url": res.URL, "title": res.Title, "content": res.Snippet, "engine": "duckduckgo", "score": 1.0})
		case ProviderBrave:
			items = append(items, item{"type": "search_result", "title": res.Title, "url": res.URL, "description": res.Snippet, "age": "2 days ago", "language": "en"})
		case ProviderTavily:
			items = append(items, item{"title": res.Title, "url": res.URL, "content": res.Snippet, "score": 0.87})
		}
	}
	switch f.provider {
	case ProviderSearXNG:
		return item{"query": r.URL.Query().Get("q"), "number_of_results": len(items), "results": items, "answers": []any{}, "suggestions": []any{}, "unresponsive_engines": []any{}}
	case ProviderBrave:
		return item{"type": "search", "query": item{"original": r.URL.Query().Get("q")}, "web": item{"type": "search", "results": items}}
	}
	return item{"query": "q", "answer": nil, "images": []any{}, "results": items, "response_time": 0.42}
}

type searchHarness struct {
	tool *searchTool
	fake *fakeProvider
	logs *bytes.Buffer
}

func newSearchHarness(t *testing.T, provider string, edit func(*SearchConfig)) *searchHarness {
	t.Helper()
	fake := &fakeProvider{provider: provider}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	cfg := SearchConfig{Provider: provider, URL: srv.URL}
	if provider != ProviderSearXNG {
		cfg.APIKey = testKey
	}
	if edit != nil {
		edit(&cfg)
	}
	logs := &bytes.Buffer{}
	tools, err := Tools(Config{Search: cfg}, Deps{Logger: slog.New(slog.NewJSONHandler(&lockedWriter{w: logs}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 {
		t.Fatalf("%d tools, want web_fetch and web_search", len(tools))
	}
	return &searchHarness{tool: tools[1].(*searchTool), fake: fake, logs: logs}
}

func (h *searchHarness) search(t *testing.T, query string) (string, error) {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"query": query})
	res, err := h.tool.Call(context.Background(), &agent.TurnContext{Channel: "test"}, args)
	return res.Content, err
}

var providers = []string{ProviderSearXNG, ProviderBrave, ProviderTavily}

func TestSearchEachProvider(t *testing.T) {
	for _, p := range providers {
		t.Run(p, func(t *testing.T) {
			h := newSearchHarness(t, p, nil)
			h.fake.results = []Result{
				{Title: "Little's law - Wikipedia", URL: "https://en.wikipedia.org/wiki/Little%27s_law", Snippet: "In queueing theory, <strong>Little's law</strong> relates L = λW &amp; more."},
				{Title: "Postgres SKIP LOCKED", URL: "https://www.postgresql.org/docs/current/sql-select.html", Snippet: "The locking clause."},
			}
			got, err := h.search(t, "little's law queue")
			if err != nil {
				t.Fatal(err)
			}
			want := "Results for \"little's law queue\" (" + p + "):\n\n" +
				"1. Little's law - Wikipedia\n   https://en.wikipedia.org/wiki/Little%27s_law\n   In queueing theory, Little's law relates L = λW & more.\n\n" +
				"2. Postgres SKIP LOCKED\n   https://www.postgresql.org/docs/current/sql-select.html\n   The locking clause.\n"
			if got != want {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestSearchNoResults(t *testing.T) {
	for _, p := range providers {
		h := newSearchHarness(t, p, nil)
		got, err := h.search(t, "zzqxj nothing matches")
		if err != nil || got != `No results for "zzqxj nothing matches".` {
			t.Errorf("%s: %q, %v", p, got, err)
		}
	}
}

// TestSearchBoundsResults: a provider answering with too many, too long or
// unusable results is trimmed to the configured count and sizes.
func TestSearchBoundsResults(t *testing.T) {
	for _, p := range providers {
		h := newSearchHarness(t, p, func(c *SearchConfig) { c.MaxResults = 3 })
		h.fake.results = []Result{
			{Title: "script", URL: "javascript:alert(1)", Snippet: "dropped"},
			{Title: "relative", URL: "/local/path", Snippet: "dropped"},
		}
		for i := range 40 {
			h.fake.results = append(h.fake.results, Result{
				Title:   strings.Repeat("标题", 300),
				URL:     fmt.Sprintf("https://example.org/%d", i),
				Snippet: strings.Repeat("很长的摘要 ", 400),
			})
		}
		got, err := h.search(t, "long")
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(got, "https://example.org/"); n != 3 {
			t.Errorf("%s: %d results, want 3", p, n)
		}
		mustNotContain(t, got, "javascript:", "/local/path", "dropped", "https://example.org/3")
		for _, line := range strings.Split(got, "\n") {
			if n := utf8.RuneCountInString(line); n > maxSnippetRunes+10 {
				t.Errorf("%s: a line of %d characters", p, n)
			}
		}
	}
}

// TestSearchClassifiesErrors: each provider's real error answers become a
// short, classified error for the model, with the key in neither the error
// nor the log, even when the provider echoes it.
func TestSearchClassifiesErrors(t *testing.T) {
	echo := `{"error":"key ` + testKey + ` rejected"}`
	cases := []struct {
		provider string
		key      string
		status   int
		body     string
		kind     string
	}{
		{ProviderBrave, "wrong-key", 0, "", KindAuth},
		{ProviderBrave, testKey, 429, `{"type":"ErrorResponse","error":{"id":"3","status":429,"code":"RATE_LIMITED","detail":"Request rate limit exceeded for plan.","meta":{"plan":"Free","rate_limit":1}},"time":1}`, KindQuota},
		{ProviderBrave, testKey, 422, `{"type":"ErrorResponse","error":{"id":"4","status":422,"code":"VALIDATION","detail":"Unable to validate request parameter(s)","meta":{}},"time":1}`, KindBadRequest},
		{ProviderBrave, testKey, 502, "<html>Bad Gateway</html>", KindUnavailable},
		{ProviderBrave, testKey, 401, echo, KindAuth},
		{ProviderTavily, "wrong-key", 0, "", KindAuth},
		{ProviderTavily, testKey, 432, `{"detail":{"error":"This request exceeds your plan's set usage limit."}}`, KindQuota},
		{ProviderTavily, testKey, 433, `{"detail":{"error":"This request exceeds the pay-as-you-go limit."}}`, KindQuota},
		{ProviderTavily, testKey, 429, `{"detail":{"error":"Too many requests."}}`, KindQuota},
		{ProviderTavily, testKey, 500, echo, KindUnavailable},
		{ProviderSearXNG, "", 403, "403 Forbidden", KindConfig},
		{ProviderSearXNG, "", 429, "Too Many Requests", KindQuota},
		{ProviderSearXNG, "", 200, `{"results": [`, KindBadResponse},
		{ProviderSearXNG, "", 200, `<html>not json</html>`, KindBadResponse},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %d %s", c.provider, c.status, c.kind), func(t *testing.T) {
			h := newSearchHarness(t, c.provider, func(cfg *SearchConfig) {
				if c.key != "" {
					cfg.APIKey = config.Secret(c.key)
				}
			})
			h.fake.status, h.fake.body = c.status, c.body
			_, err := h.search(t, "anything")
			var se *SearchError
			if !errors.As(err, &se) || se.Kind != c.kind || se.Provider != c.provider {
				t.Fatalf("got %v, want a %s error from %s", err, c.kind, c.provider)
			}
			for _, secret := range []string{testKey, c.key} {
				if secret == "" {
					continue
				}
				if strings.Contains(err.Error(), secret) || strings.Contains(h.logs.String(), secret) {
					t.Errorf("the key leaked:\nerror: %v\nlog: %s", err, h.logs.String())
				}
			}
			if strings.Contains(err.Error(), "127.0.0.1") {
				t.Errorf("the provider's address reached the model: %v", err)
			}
			mustContain(t, h.logs.String(), `"msg":"web_search failed"`, `"kind":"`+c.kind+`"`, `"provider":"`+c.provider+`"`)
		})
	}
}

func TestSearchProviderDownOrSlow(t *testing.T) {
	h := newSearchHarness(t, ProviderTavily, func(c *SearchConfig) { c.Timeout = 150 * time.Millisecond })
	h.fake.hang = make(chan struct{})
	defer close(h.fake.hang)
	_, err := h.search(t, "slow")
	var se *SearchError
	if !errors.As(err, &se) || se.Kind != KindUnavailable || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hanging provider: %v; want unavailable, counted as a timeout", err)
	}

	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	tools, err := Tools(Config{Search: SearchConfig{Provider: ProviderSearXNG, URL: closed.URL}}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tools[1].Call(context.Background(), &agent.TurnContext{}, json.RawMessage(`{"query":"x"}`))
	if !errors.As(err, &se) || se.Kind != KindUnavailable || strings.Contains(err.Error(), closed.URL) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("unreachable provider: %v; want unavailable, not a timeout", err)
	}
}

func TestSearchRefusesEmptyQuery(t *testing.T) {
	h := newSearchHarness(t, ProviderSearXNG, nil)
	if _, err := h.search(t, "  \n "); err == nil {
		t.Error("an empty query was sent")
	}
}

// TestSearchOfferedOnlyWhenConfigured: web_fetch is always there,
// web_search only with a provider; a provider without its key or URL is a
// configuration error that names the key and never prints a value.
func TestSearchOfferedOnlyWhenConfigured(t *testing.T) {
	tools, err := Tools(Config{}, Deps{})
	if err != nil || len(tools) != 1 || tools[0].Name() != "web_fetch" {
		t.Fatalf("without a provider: %v, %v", tools, err)
	}
	bad := []struct {
		cfg  SearchConfig
		want string
	}{
		{SearchConfig{Provider: ProviderBrave}, "tools.web_search.api_key: required for provider brave"},
		{SearchConfig{Provider: ProviderTavily, APIKey: "  "}, "tools.web_search.api_key: required for provider tavily"},
		{SearchConfig{Provider: ProviderSearXNG}, "tools.web_search.url: required for provider searxng"},
		{SearchConfig{Provider: ProviderSearXNG, URL: "http://searxng:8080", APIKey: testKey}, "provider searxng takes no API key"},
		{SearchConfig{Provider: "google", APIKey: testKey}, `tools.web_search.provider: "google" is not one of`},
		{SearchConfig{Provider: ProviderBrave, APIKey: testKey, URL: "ftp://x"}, "tools.web_search.url: must be an absolute http or https URL"},
		{SearchConfig{Provider: ProviderBrave, APIKey: testKey, MaxResults: 50}, "tools.web_search.max_results"},
	}
	for _, b := range bad {
		_, err := Tools(Config{Search: b.cfg}, Deps{})
		if err == nil || !strings.Contains(err.Error(), b.want) || strings.Contains(err.Error(), testKey) {
			t.Errorf("%+v: got %v, want %q", b.cfg.Provider, err, b.want)
		}
	}
	tools, err = Tools(Config{Search: SearchConfig{Provider: "Brave", APIKey: testKey}}, Deps{})
	if err != nil || len(tools) != 2 || tools[1].Name() != "web_search" {
		t.Fatalf("with a provider: %v, %v", tools, err)
	}
	if u := tools[1].(*searchTool).cfg.URL; u != DefaultBraveURL {
		t.Errorf("brave URL %q, want the default %q", u, DefaultBraveURL)
	}
	for _, tool := range tools {
		if tool.Writes() {
			t.Errorf("%s is a write tool", tool.Name())
		}
		if err := agent.NewRegistry().Register(tool); err != nil {
			t.Errorf("%s cannot be registered: %v", tool.Name(), err)
		}
	}
}

func TestFetchConfigValidation(t *testing.T) {
	bad := map[string]FetchConfig{
		"tools.web_fetch.max_bytes": {MaxBytes: -1},
		"tools.web_fetch.timeout":   {Timeout: -time.Second},
	}
	for want, cfg := range bad {
		if err := (Config{Fetch: cfg}).Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: got %v, want %q", cfg, err, want)
		}
	}
	d := FetchConfig{}.withDefaults()
	if d.MaxBytes != DefaultMaxBytes || d.Timeout != DefaultFetchTimeout {
		t.Errorf("defaults: %+v", d)
	}
}
