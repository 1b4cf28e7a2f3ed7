package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/config"
)

// Bounds on what web_search sends and returns.
const (
	maxQueryRunes   = 400 // Brave's own limit, and more than any good query needs
	maxTitleRunes   = 200
	maxSnippetRunes = 400
	maxResponseBody = 2 << 20
	maxErrorDetail  = 300
)

// Result is one search hit as the model sees it.
type Result struct {
	Title   string
	URL     string
	Snippet string
}

// provider is one search API. The tool owns the HTTP exchange, the bounds
// and the error texts; a provider only knows its wire format.
type provider interface {
	request(ctx context.Context, query string, n int) (*http.Request, error)
	decode(body []byte) ([]Result, error)
	// classify reads a non-200 answer: the failure kind and the provider's
	// own explanation, for the log.
	classify(status int, body []byte) (kind, detail string)
}

// Failure kinds of web_search, each with its own advice to the model.
const (
	KindAuth        = "auth"         // the API key is missing or rejected
	KindQuota       = "quota"        // rate limited or the plan is spent
	KindBadRequest  = "bad_request"  // the provider refused the query
	KindUnavailable = "unavailable"  // network failure, timeout or 5xx
	KindBadResponse = "bad_response" // an answer that cannot be read
	KindConfig      = "config"       // the provider is set up wrongly
)

// SearchError is a classified web_search failure. Its message is what the
// model reads: the provider and the kind, never a URL or a key.
type SearchError struct {
	Provider string
	Kind     string
	Status   int // HTTP status, 0 when none arrived
	// timedOut: the search ran out of its timeout; the error then is a
	// context.DeadlineExceeded, so the agent counts the call as timed out.
	timedOut bool
}

// Is reports whether a timed-out search matches context.DeadlineExceeded.
func (e *SearchError) Is(target error) bool {
	return e.timedOut && target == context.DeadlineExceeded
}

func (e *SearchError) Error() string {
	status := ""
	if e.Status != 0 {
		status = fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	switch e.Kind {
	case KindAuth:
		return fmt.Sprintf("web_search is not available: the %s search provider rejected the server's API key%s. Tell the user that web search is misconfigured; do not retry.", e.Provider, status)
	case KindQuota:
		return fmt.Sprintf("web_search is rate limited or out of quota at %s%s. Try once more later, or answer without searching and say so.", e.Provider, status)
	case KindBadRequest:
		return fmt.Sprintf("the %s search provider refused this query%s. Use a shorter, plainer query.", e.Provider, status)
	case KindBadResponse:
		return fmt.Sprintf("the %s search provider sent an answer that could not be read%s. Try once more, or answer without searching.", e.Provider, status)
	case KindConfig:
		return fmt.Sprintf("web_search is not available: the %s search provider is set up wrongly%s. Tell the user that web search is misconfigured; do not retry.", e.Provider, status)
	}
	return fmt.Sprintf("the %s search provider is unavailable%s. Try once more later, or answer without searching.", e.Provider, status)
}

// classifyStatus is the one place HTTP statuses become failure kinds;
// providers refine it from their error bodies.
func classifyStatus(status int) string {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return KindAuth
	case status == http.StatusTooManyRequests || status == http.StatusPaymentRequired || status == 432 || status == 433:
		return KindQuota // 432 and 433 are Tavily's plan and pay-as-you-go limits
	case status >= 500:
		return KindUnavailable
	case status >= 400:
		return KindBadRequest
	}
	return KindBadResponse
}

// searchTool is web_search.
type searchTool struct {
	cfg      SearchConfig
	provider provider
	client   *http.Client
	log      *slog.Logger
}

var _ agent.Tool = (*searchTool)(nil)

func newSearchTool(cfg SearchConfig, deps Deps) (*searchTool, error) {
	var p provider
	switch cfg.Provider {
	case ProviderSearXNG:
		p = searxng{base: cfg.URL}
	case ProviderBrave:
		p = brave{base: cfg.URL, key: cfg.APIKey}
	case ProviderTavily:
		p = tavily{base: cfg.URL, key: cfg.APIKey}
	default:
		return nil, fmt.Errorf("web: unknown search provider %q", cfg.Provider)
	}
	// The provider URL is the operator's, not the model's, so the SSRF
	// guard does not apply (a self-hosted SearXNG is usually private) and
	// an egress proxy from the environment is honoured.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxResponseHeaderBytes = maxHeaderBytes
	return &searchTool{
		cfg:      cfg,
		provider: p,
		client: &http.Client{
			Transport: transport,
			Timeout:   cfg.Timeout,
			// A search API never redirects on purpose; following one could
			// carry the key somewhere else.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		log: deps.Logger.With("tool", "web_search", "provider", cfg.Provider),
	}, nil
}

func (*searchTool) Name() string { return "web_search" }

func (t *searchTool) Description() string {
	return fmt.Sprintf("Search the web. Returns up to %d results, each with a title, URL and snippet. "+
		"Use it for current or unfamiliar facts, then web_fetch the most relevant URLs to read them before answering; cite the URLs you used.", t.cfg.MaxResults)
}

// searchToolParams is searchTool's schema, made once: a conversion in
// Parameters would copy it for every request.
var searchToolParams = json.RawMessage(`{"type":"object","properties":{` +
	`"query":{"type":"string","description":"what to search for, in the words a good search would use"}},` +
	`"required":["query"],"additionalProperties":false}`)

func (*searchTool) Parameters() json.RawMessage { return searchToolParams }

func (*searchTool) Writes() bool { return false }

func (t *searchTool) Call(ctx context.Context, tc *agent.TurnContext, raw json.RawMessage) (agent.Result, error) {
	var args struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return agent.Result{}, fmt.Errorf("arguments: %w", err)
	}
	query := oneLine(args.Query)
	if query == "" {
		return agent.Result{}, errors.New("the query is empty")
	}
	query, _ = truncateRunes(query, maxQueryRunes)
	results, err := t.search(ctx, query)
	if err != nil {
		return agent.Result{}, err
	}
	return agent.Result{Content: formatResults(query, t.cfg.Provider, results)}, nil
}

func (t *searchTool) search(ctx context.Context, query string) ([]Result, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	req, err := t.provider.request(ctx, query, t.cfg.MaxResults)
	if err != nil {
		return nil, t.fail(ctx, KindConfig, 0, err.Error())
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := t.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL is the operator's; keep it out of the detail
		}
		ferr := t.fail(ctx, KindUnavailable, 0, err.Error())
		if isTimeout(err) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			ferr.(*SearchError).timedOut = true
		}
		return nil, ferr
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody+1))
	if err != nil {
		return nil, t.fail(ctx, KindUnavailable, resp.StatusCode, err.Error())
	}
	if resp.StatusCode != http.StatusOK {
		kind, detail := t.provider.classify(resp.StatusCode, body)
		return nil, t.fail(ctx, kind, resp.StatusCode, detail)
	}
	if len(body) > maxResponseBody {
		return nil, t.fail(ctx, KindBadResponse, resp.StatusCode, "answer larger than the limit")
	}
	results, err := t.provider.decode(body)
	if err != nil {
		return nil, t.fail(ctx, KindBadResponse, resp.StatusCode, err.Error())
	}
	return boundResults(results, t.cfg.MaxResults), nil
}

// fail logs a failure with the provider's detail, the API key scrubbed from
// it, and returns the model's version, which has no detail at all.
func (t *searchTool) fail(ctx context.Context, kind string, status int, detail string) error {
	if key := t.cfg.APIKey.Reveal(); key != "" {
		detail = strings.ReplaceAll(detail, key, config.Redacted)
	}
	detail, _ = truncateRunes(oneLine(detail), maxErrorDetail)
	t.log.WarnContext(ctx, "web_search failed", "kind", kind, "status", status, "detail", detail)
	return &SearchError{Provider: t.cfg.Provider, Kind: kind, Status: status}
}

// boundResults keeps at most n results with http(s) URLs, each field cut to
// its limit and snippets stripped of the markup some providers add.
func boundResults(in []Result, n int) []Result {
	out := make([]Result, 0, min(len(in), n))
	for _, r := range in {
		if len(out) == n {
			break
		}
		u, err := url.Parse(strings.TrimSpace(r.URL))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(r.URL) > maxURLBytes {
			continue
		}
		title, _ := truncateRunes(plainText(r.Title), maxTitleRunes)
		snippet, cut := truncateRunes(plainText(r.Snippet), maxSnippetRunes)
		if cut {
			snippet += "…"
		}
		out = append(out, Result{Title: title, URL: u.String(), Snippet: snippet})
	}
	return out
}

func formatResults(query, provider string, results []Result) string {
	if len(results) == 0 {
		return fmt.Sprintf("No results for %q.", query)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Results for %q (%s):\n", query, provider)
	for i, r := range results {
		title := r.Title
		if title == "" {
			title = "(no title)"
		}
		fmt.Fprintf(&b, "\n%d. %s\n   %s\n", i+1, title, r.URL)
		if r.Snippet != "" {
			fmt.Fprintf(&b, "   %s\n", r.Snippet)
		}
	}
	return b.String()
}

var tagRE = regexp.MustCompile(`<[^>]*>`)

// plainText removes HTML tags and entities (Brave marks matches with
// <strong>) and folds whitespace.
func plainText(s string) string {
	return oneLine(html.UnescapeString(tagRE.ReplaceAllString(s, "")))
}

// truncateRunes cuts s to at most n code points and reports whether it cut.
func truncateRunes(s string, n int) (string, bool) {
	if utf8.RuneCountInString(s) <= n {
		return s, false
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j], true
		}
		i++
	}
	return s, false
}
