package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/parleyhq/parley/metrics"
	openai "github.com/sashabaranov/go-openai"
)

// outcomeRetry labels LLM request attempts that failed and were retried.
// metrics names only ok/error/denied, but its help text lists "retry".
const outcomeRetry = metrics.OutcomeRetry

// errNoChoices marks a 200 response without any choice, which is as useless
// as a body that does not parse and is retried like one.
var errNoChoices = errors.New("agent: model response has no choices")

// complete sends one chat completion request, retrying what is worth
// retrying, and adds the tokens of the answer to usage.
func (a *Agent) complete(ctx context.Context, channel string, msgs []openai.ChatCompletionMessage, tools []openai.Tool, usage *Usage) (openai.ChatCompletionMessage, error) {
	req := openai.ChatCompletionRequest{
		Model:               a.cfg.Model,
		Messages:            msgs,
		Tools:               tools,
		MaxCompletionTokens: a.cfg.MaxTokens,
	}
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
		actx, slot := withRetryAfterSlot(actx)
		start := time.Now()
		resp, err := a.client.CreateChatCompletion(actx, req)
		cancel()
		elapsed := time.Since(start)
		if err == nil && len(resp.Choices) == 0 {
			err = errNoChoices
		}
		if err == nil {
			a.observeRequest(metrics.OutcomeOK, elapsed)
			a.addUsage(channel, resp.Usage, usage)
			return resp.Choices[0].Message, nil
		}
		if ctx.Err() != nil {
			a.observeRequest(metrics.OutcomeError, elapsed)
			return openai.ChatCompletionMessage{}, ctx.Err()
		}
		if !retryable(err) || attempt >= a.cfg.MaxRetries {
			a.observeRequest(metrics.OutcomeError, elapsed)
			return openai.ChatCompletionMessage{}, fmt.Errorf("agent: chat completion failed after %d attempt(s): %w", attempt+1, err)
		}
		a.observeRequest(outcomeRetry, elapsed)
		if a.m != nil {
			a.m.LLMRetries.Inc()
		}
		wait, fromServer := slot.get()
		if !fromServer {
			wait = a.backoff(attempt)
		}
		a.log.WarnContext(ctx, "agent: model request failed, retrying",
			"attempt", attempt+1, "wait", wait, "retry_after", fromServer, "duration", elapsed, "err", err)
		if err := a.cfg.Sleep(ctx, wait); err != nil {
			return openai.ChatCompletionMessage{}, err
		}
	}
}

// retryable reports whether a failed request may succeed when sent again:
// rate limits, server errors, timeouts, transport failures and bodies that
// do not decode. Client errors (400, 401, 403, 404, …) fail at once, since
// sending the same request again cannot fix them.
func retryable(err error) bool {
	// Status errors first: a 401 whose body is not JSON is still a 401.
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		return retryableStatus(apiErr.HTTPStatusCode)
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		return retryableStatus(reqErr.HTTPStatusCode)
	}
	var (
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
		netErr    net.Error
		urlErr    *url.Error
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF),
		errors.Is(err, errNoChoices),
		errors.As(err, &syntaxErr),
		errors.As(err, &typeErr),
		errors.As(err, &netErr),
		errors.As(err, &urlErr):
		return true
	}
	return false
}

func retryableStatus(code int) bool {
	switch {
	case code == http.StatusRequestTimeout, code == http.StatusConflict, code == http.StatusTooManyRequests:
		return true
	case code >= 500:
		return true
	}
	return false
}

// backoff returns the wait before retry number attempt+1: exponential from
// BackoffBase, capped at BackoffMax, with the upper half jittered so that
// conversations failing together do not retry together.
func (a *Agent) backoff(attempt int) time.Duration {
	d := a.cfg.BackoffBase
	for range attempt {
		if d >= a.cfg.BackoffMax/2 {
			d = a.cfg.BackoffMax
			break
		}
		d *= 2
	}
	d = min(d, a.cfg.BackoffMax)
	half := d / 2
	return half + rand.N(d-half+1)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *Agent) observeRequest(outcome string, d time.Duration) {
	if a.m == nil {
		return
	}
	a.m.LLMRequests.WithLabelValues(outcome).Inc()
	a.m.LLMLatency.WithLabelValues(outcome).Observe(d.Seconds())
}

func (a *Agent) addUsage(channel string, u openai.Usage, sum *Usage) {
	// Counters panic on negative adds; a server's numbers are not trusted
	// that far.
	prompt, completion, cached := max(u.PromptTokens, 0), max(u.CompletionTokens, 0), 0
	if u.PromptTokensDetails != nil {
		cached = max(u.PromptTokensDetails.CachedTokens, 0)
	}
	sum.Prompt += prompt
	sum.Completion += completion
	sum.Cached += cached
	if a.m == nil {
		return
	}
	a.m.LLMTokens.WithLabelValues(channel, "prompt").Add(float64(prompt))
	a.m.LLMTokens.WithLabelValues(channel, "completion").Add(float64(completion))
	a.m.LLMTokens.WithLabelValues(channel, "cached").Add(float64(cached))
}
