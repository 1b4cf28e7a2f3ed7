package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/retry"
	"github.com/parleyhq/parley/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// integrationModel is the model's integration label in
// parley_outbound_failures_total.
const integrationModel = "model"

// errNoChoices marks a 200 response without any choice, which is as useless
// as a body that does not parse and is retried like one.
var errNoChoices = errors.New("agent: model response has no choices")

// complete sends one encoded chat completion request on the retry loop,
// retrying what is worth retrying, and adds the tokens of the answer to
// usage. Every attempt is counted in parley_llm_requests_total by what
// followed it: ok, retry (it failed and was sent again) or error (it
// failed the call). The answer's text goes to ev as it streams in; text
// of an attempt that failed is withdrawn (EventReset) before the next.
func (a *Agent) complete(ctx context.Context, ep *endpoint, channel string, body []byte, usage *Usage, ev *emitter) (_ openai.ChatCompletionMessage, _ openai.FinishReason, err error) {
	ctx, span := a.cfg.Tracer.StartKind(ctx, "model", trace.SpanKindClient)
	var this Usage // this request's tokens, for the span
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attribute.String("gen_ai.request.model", ep.name), attribute.String("parley.model", ep.key),
				attribute.Int("gen_ai.usage.input_tokens", this.Prompt), attribute.Int("gen_ai.usage.output_tokens", this.Completion),
				attribute.Int("parley.usage.cached_tokens", this.Cached), attribute.Int("gen_ai.usage.reasoning_tokens", this.Reasoning),
				attribute.Int("parley.request.bytes", len(body)),
				attribute.Bool("parley.request.streamed", !ep.noStream.Load()))
		}
		tracing.Fail(span, err)
		span.End()
	}()
	var answer openai.ChatCompletionMessage
	var finish openai.FinishReason
	err = ep.retrier.Do(ctx, "chat completion", func(ctx context.Context) (bool, time.Duration, error) {
		actx, cancel := context.WithTimeout(ctx, ep.timeout)
		defer cancel()
		resp, after, err := a.attempt(actx, ep, body, ev)
		if err == nil && len(resp.Choices) == 0 {
			err = errNoChoices
		}
		if err != nil {
			ev.reset()
			return retryable(err), after, retry.Mark(failureReason(err, after), fmt.Errorf("agent: chat completion: %w", err))
		}
		a.addUsage(channel, ep.key, resp.Usage, &this)
		answer, finish = resp.Choices[0].Message, resp.Choices[0].FinishReason
		return false, 0, nil
	})
	if err != nil {
		return openai.ChatCompletionMessage{}, "", err
	}
	usage.Prompt += this.Prompt
	usage.Completion += this.Completion
	usage.Cached += this.Cached
	usage.Reasoning += this.Reasoning
	return answer, finish, nil
}

// attempt sends body once to ep: streamed, unless that model has shown
// that it does not stream. A model that answers a streaming request whole,
// or refuses it while taking the same request without "stream", is not
// asked to stream again.
func (a *Agent) attempt(ctx context.Context, ep *endpoint, body []byte, ev *emitter) (openai.ChatCompletionResponse, time.Duration, error) {
	if ep.noStream.Load() {
		return ep.client.send(ctx, body)
	}
	resp, after, whole, err := ep.client.sendStream(ctx, body, a.cfg.StreamIdleTimeout, ev.onText())
	switch {
	case err == nil && whole:
		a.streamingOff(ctx, ep, "the model answered a streaming request in one piece")
	case err != nil && refusesStreaming(err):
		plain, plainAfter, plainErr := ep.client.send(ctx, body)
		if plainErr != nil {
			// Refused with or without "stream": the request itself is at
			// fault, and streaming may well work.
			return plain, plainAfter, plainErr
		}
		a.streamingOff(ctx, ep, "the model refused a streaming request and took it without streaming")
		return plain, plainAfter, nil
	}
	return resp, after, err
}

// streamingOff stops asking ep to stream, saying so once.
func (a *Agent) streamingOff(ctx context.Context, ep *endpoint, why string) {
	if ep.noStream.CompareAndSwap(false, true) {
		a.log.WarnContext(ctx, why+"; answers are asked for whole from now on, and shown only once complete", "model", ep.key)
	}
}

// completeMessages sends a request built from go-openai's message type,
// for the rare requests that are not a turn (compaction), to the default
// model and its fallbacks.
func (a *Agent) completeMessages(ctx context.Context, channel string, msgs []openai.ChatCompletionMessage, usage *Usage) (openai.ChatCompletionMessage, error) {
	if _, err := json.Marshal(msgs); err != nil {
		return openai.ChatCompletionMessage{}, fmt.Errorf("agent: encode request: %w", err)
	}
	pos := 0
	answer, _, err := a.ask(ctx, a.log.With("channel", channel), channel, a.primary.chain, &pos, func(ep *endpoint) *[]byte {
		// The messages encoded above; only the model differs.
		body, _ := json.Marshal(openai.ChatCompletionRequest{Model: ep.name, Messages: msgs, MaxCompletionTokens: a.cfg.MaxTokens})
		return &body
	}, usage, nil)
	return answer, err
}

// observeAttempt counts one attempt of complete, once the retry loop has
// decided what follows it.
func (a *Agent) observeAttempt(model string, at retry.Attempted) {
	a.m.LLMRequests.WithLabelValues(model, at.Outcome).Inc()
	tracing.Observe(at.Context, a.m.LLMLatency.WithLabelValues(at.Outcome), at.Duration.Seconds())
	if at.Outcome == metrics.OutcomeRetry {
		a.m.LLMRetries.Inc()
	}
}

// retryable reports whether a failed request may succeed when sent again:
// rate limits, server errors, timeouts, transport failures and bodies that
// do not decode. Client errors (400, 401, 403, 404, …) fail at once, since
// sending the same request again cannot fix them, and so do the errors
// that say so whatever their status (see neverSucceeds).
func retryable(err error) bool {
	if errors.Is(err, errResponseTooLarge) || errors.Is(err, errTooManyCalls) || errors.Is(err, ErrNotAnAPI) || neverSucceeds(err) {
		return false
	}
	// Status errors first: a 401 whose body is not JSON is still a 401.
	if code, ok := statusOf(err); ok {
		return retryableStatus(code)
	}
	var (
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
		netErr    net.Error
		urlErr    *url.Error
		streamErr *streamError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF),
		errors.Is(err, errNoChoices),
		errors.As(err, &syntaxErr),
		errors.As(err, &typeErr),
		errors.As(err, &netErr),
		errors.As(err, &urlErr),
		errors.As(err, &streamErr):
		return true
	}
	return false
}

// statusOf is the HTTP status of a failed request, when it got one.
func statusOf(err error) (int, bool) {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		return apiErr.HTTPStatusCode, true
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		return reqErr.HTTPStatusCode, true
	}
	return 0, false
}

// retryableStatus is retry.RetryableStatus plus 409, which OpenAI-style
// servers answer for a request that collided with another.
func retryableStatus(code int) bool {
	return code == http.StatusConflict || retry.RetryableStatus(code)
}

// failureReason names a failed request for the failures metric.
func failureReason(err error, after time.Duration) retry.Reason {
	if code, ok := statusOf(err); ok {
		return retry.StatusReason(code)
	}
	if errors.Is(err, errNoChoices) || errors.Is(err, errResponseTooLarge) || errors.Is(err, errTooManyCalls) {
		return retry.BadResponse
	}
	var streamErr *streamError
	if errors.As(err, &streamErr) {
		if streamErr.status != 0 {
			return retry.StatusReason(streamErr.status)
		}
		return retry.ServerError
	}
	return retry.ReasonOf(err, after)
}

func (a *Agent) addUsage(channel, model string, u openai.Usage, sum *Usage) {
	// Counters panic on negative adds; a server's numbers are not trusted
	// that far.
	prompt, completion, cached, reasoning := max(u.PromptTokens, 0), max(u.CompletionTokens, 0), 0, 0
	if u.PromptTokensDetails != nil {
		cached = max(u.PromptTokensDetails.CachedTokens, 0)
	}
	// Reasoning tokens are part of the completion tokens; where the
	// provider reports them they are counted apart as well.
	if u.CompletionTokensDetails != nil {
		reasoning = max(u.CompletionTokensDetails.ReasoningTokens, 0)
	}
	sum.Prompt += prompt
	sum.Completion += completion
	sum.Cached += cached
	sum.Reasoning += reasoning
	a.m.LLMTokens.WithLabelValues(channel, model, "prompt").Add(float64(prompt))
	a.m.LLMTokens.WithLabelValues(channel, model, "completion").Add(float64(completion))
	a.m.LLMTokens.WithLabelValues(channel, model, "cached").Add(float64(cached))
	if reasoning > 0 {
		a.m.LLMTokens.WithLabelValues(channel, model, "reasoning").Add(float64(reasoning))
	}
}
